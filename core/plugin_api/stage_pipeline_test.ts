import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { SessionStage, StageLink } from "./session_stage.ts";
import { compose } from "./stage_pipeline.ts";

/** A stage that records what passes it, under `name`, and hands everything on. */
function recorder(name: string, seen: string[]): SessionStage & { link?: StageLink } {
  const stage: SessionStage & { link?: StageLink } = {
    attach(link) {
      stage.link = link;
    },
    receive(message, extra, next) {
      seen.push(`${name} in ${describe(message)}`);
      next(message, extra);
    },
    send(message, options, next) {
      seen.push(`${name} out ${describe(message)}`);
      return next(message, options);
    },
    closed() {
      seen.push(`${name} closed`);
    },
  };
  return stage;
}

function describe(message: JSONRPCMessage): string {
  const m = message as { method?: string; id?: unknown };
  return m.method ?? `reply ${String(m.id)}`;
}

/** A real SDK Server (one tool) behind `stages`, and a real Client, over the in-memory pair. */
async function session(stages: SessionStage[]) {
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  const server = new Server({ name: "pipeline-test", version: "1.0.0" }, {
    capabilities: { tools: {} },
  });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [{ name: "echo", inputSchema: { type: "object" } }],
  }));
  let serverClosed = false;
  server.onclose = () => serverClosed = true;
  await server.connect(compose(serverTransport, stages));
  const client = new Client({ name: "pipeline-test-client", version: "1.0.0" });
  await client.connect(clientTransport);
  return { client, server, serverTransport, closed: () => serverClosed };
}

Deno.test("inbound messages pass the stages transport side first, answers leave in reverse", async () => {
  const seen: string[] = [];
  const s = await session([recorder("outer", seen), recorder("inner", seen)]);
  try {
    seen.length = 0;
    const { tools } = await s.client.listTools();
    assert.equal(tools.length, 1);
    assert.deepEqual(seen, [
      "outer in tools/list",
      "inner in tools/list",
      "inner out reply 1",
      "outer out reply 1",
    ]);
  } finally {
    await s.client.close();
  }
});

Deno.test("a stage that does not call next keeps the message from the stages after it", async () => {
  const seen: string[] = [];
  let link: StageLink | undefined;
  const refusing: SessionStage = {
    attach: (past) => void (link = past),
    receive(message, extra, next) {
      const m = message as { method?: string; id?: string | number };
      if (m.method !== "tools/list") return next(message, extra);
      // Answered here, past this stage toward the transport: the Server never sees it.
      void link!.send({
        jsonrpc: "2.0",
        id: m.id!,
        error: { code: -32000, message: "refused by the stage" },
      });
    },
  };
  const s = await session([recorder("outer", seen), refusing, recorder("inner", seen)]);
  try {
    seen.length = 0;
    await assert.rejects(s.client.listTools(), /refused by the stage/);
    assert.deepEqual(seen, ["outer in tools/list", "outer out reply 1"]);
  } finally {
    await s.client.close();
  }
});

Deno.test("a stage's link delivers inbound messages to the stages after it, not to itself", async () => {
  const seen: string[] = [];
  const injector = recorder("injector", seen);
  const s = await session([recorder("outer", seen), injector, recorder("inner", seen)]);
  try {
    seen.length = 0;
    injector.link!.receive({ jsonrpc: "2.0", method: "notifications/initialized" });
    assert.deepEqual(seen, ["inner in notifications/initialized"]);
  } finally {
    await s.client.close();
  }
});

Deno.test("the transport closing tells every stage, transport side first, then the Server", async () => {
  const seen: string[] = [];
  const s = await session([recorder("outer", seen), recorder("inner", seen)]);
  seen.length = 0;
  await s.client.close();
  assert.deepEqual(seen, ["outer closed", "inner closed"]);
  assert.ok(s.closed(), "the SDK Server heard the close after the stages");
});

Deno.test("the Server's transport reports the session id of the transport under it", async () => {
  const [, serverTransport] = InMemoryTransport.createLinkedPair();
  serverTransport.sessionId = "s-1";
  const composed = compose(serverTransport, []);
  assert.equal(composed.sessionId, "s-1");
  await composed.close();
});
