/**
 * tools/call served by the lane (off the transport) and relayed raw to the upstream behaves as it
 * did through the SDK: the same results, progress, cancellation and error codes, over Streamable
 * HTTP and over stdio, with server-everything from npm as the upstream.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  type CallToolResult,
  McpError,
  type Progress,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { StreamTransport } from "../../core/mcp/stream_transport.ts";
import { FrameReader, spawnStdioGateway } from "../support/child_gateway.ts";
import { EVERYTHING, everythingServer, writeFleet } from "../support/fleet.ts";
import { connectHttp, initializeRequest, startGateway } from "../support/gateway.ts";

/** Leak sanitizers on (Deno 2.9 has them off by default): every timer cleared, every process reaped. */
const SANITIZED = { sanitizeOps: true, sanitizeResources: true };

const FLEET = `proxy_servers:${everythingServer()}`;

/** get-env is denied to every tenant (as in the demo policy); everything else is allowed. */
const POLICY = `
tenants:
  "*":
    deny: [everything__get-env]
`;

type Inbound = "Streamable HTTP" | "stdio";
const INBOUNDS: Inbound[] = ["Streamable HTTP", "stdio"];

/** Runs `fn` with an SDK client of a real gateway (in front of server-everything) over `inbound`. */
async function withGateway(inbound: Inbound, fn: (client: Client) => Promise<void>) {
  const fleet = await writeFleet(FLEET);
  await Deno.writeTextFile(`${fleet.dir}/policy.yaml`, POLICY);
  const env = { MCP_PROXY_CONFIG_PATH: fleet.path, MCP_POLICY_PATH: `${fleet.dir}/policy.yaml` };
  try {
    if (inbound === "Streamable HTTP") {
      const gateway = await startGateway(env);
      try {
        await gateway.kernel.fleetStarted;
        assert.equal(gateway.kernel.proxy.get("everything")?.state, "READY");
        const client = await connectHttp(gateway);
        try {
          await fn(client);
        } finally {
          await client.close();
        }
      } finally {
        await gateway.stop();
      }
    } else {
      const child = spawnStdioGateway(env);
      const client = new Client({ name: "lane-e2e-stdio", version: "1.0.0" });
      try {
        const changed = Promise.withResolvers<void>();
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed.resolve());
        await client.connect(
          new StreamTransport(child.stdout, child.stdin, {
            maxMessageBytes: 1 << 24,
            answerMalformed: false,
          }),
        );
        // Upstreams start in the background; tools/list_changed says when they are in.
        const listed = async () =>
          (await client.listTools()).tools.some((t) => t.name === "everything__echo");
        if (!(await listed())) {
          await changed.promise;
          assert.ok(await listed(), "the upstream's tools are listed after list_changed");
        }
        await fn(client);
      } finally {
        await client.close();
        await child.process.status;
        await child.stderr;
      }
    }
  } finally {
    await fleet.remove();
  }
}

/** Runs `fn` with an SDK client of server-everything itself (no gateway), over stdio. */
async function withDirectUpstream(fn: (client: Client) => Promise<void>) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-config", "--no-prompt", "--allow-env", "--allow-read", EVERYTHING, "stdio"],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const client = new Client({ name: "lane-e2e-direct", version: "1.0.0" });
  try {
    await client.connect(
      new StreamTransport(child.stdout, child.stdin, {
        maxMessageBytes: 1 << 24,
        answerMalformed: false,
      }),
    );
    await fn(client);
  } finally {
    await client.close();
    try {
      child.kill("SIGTERM");
    } catch { /* already gone */ }
    await child.status;
  }
}

/** The result a call gets, or the error it gets, as plain data. */
function outcome(call: Promise<unknown>) {
  return call.then(
    (result) => ({ result }),
    (error: McpError) => ({
      error: { code: error.code, message: error.message, data: error.data },
    }),
  );
}

const CALLS = [
  { name: "echo", arguments: { message: "parity through the lane" } },
  { name: "get-sum", arguments: { a: 2, b: 40 } },
  { name: "get-structured-content", arguments: { location: "Chicago" } },
  { name: "get-tiny-image", arguments: {} },
  { name: "get-annotated-message", arguments: { messageType: "error", includeImage: true } },
];

Deno.test(
  "A proxied call's result equals the direct upstream's result for the same call",
  SANITIZED,
  async (t) => {
    const direct: unknown[] = [];
    await withDirectUpstream(async (client) => {
      for (const call of CALLS) direct.push(await outcome(client.callTool(call)));
    });
    assert.deepEqual(direct[0], {
      result: { content: [{ type: "text", text: "Echo: parity through the lane" }] },
    });
    for (const inbound of INBOUNDS) {
      await t.step(`over ${inbound}`, async () => {
        await withGateway(inbound, async (client) => {
          for (const [i, call] of CALLS.entries()) {
            const proxied = await outcome(
              client.callTool({ ...call, name: `everything__${call.name}` }),
            );
            assert.deepEqual(proxied, direct[i], `${call.name} ${JSON.stringify(call.arguments)}`);
          }
        });
      });
    }
  },
);

Deno.test(
  "A call with a progress token receives the upstream's progress notifications before its result",
  SANITIZED,
  async (t) => {
    for (const inbound of INBOUNDS) {
      await t.step(`over ${inbound}`, async () => {
        await withGateway(inbound, async (client) => {
          const seen: Progress[] = [];
          const result = await client.callTool(
            {
              name: "everything__trigger-long-running-operation",
              arguments: { duration: 0.5, steps: 5 },
            },
            undefined,
            { onprogress: (progress) => seen.push(progress) },
          ) as CallToolResult;
          assert.deepEqual(seen.map((p) => [p.progress, p.total]), [
            [1, 5],
            [2, 5],
            [3, 5],
            [4, 5],
            [5, 5],
          ]);
          assert.match(JSON.stringify(result.content), /completed/i);
        });
      });
    }
  },
);

Deno.test("Cancelling a call leaves the gateway serving the next call", SANITIZED, async (t) => {
  for (const inbound of INBOUNDS) {
    await t.step(`over ${inbound}`, async () => {
      await withGateway(inbound, async (client) => {
        const controller = new AbortController();
        const call = client.callTool(
          {
            name: "everything__trigger-long-running-operation",
            arguments: { duration: 10, steps: 50 },
          },
          undefined,
          { signal: controller.signal, onprogress: () => controller.abort("enough") },
        );
        await assert.rejects(call, /enough/);
        for (const message of ["after", "and again"]) {
          const echo = await client.callTool({
            name: "everything__echo",
            arguments: { message },
          });
          assert.deepEqual(echo.content, [{ type: "text", text: `Echo: ${message}` }]);
        }
      });
    });
  }
});

Deno.test(
  "An unknown tool and a governance denial produce the same error codes as before",
  SANITIZED,
  async (t) => {
    for (const inbound of INBOUNDS) {
      await t.step(`over ${inbound}`, async () => {
        await withGateway(inbound, async (client) => {
          await assert.rejects(
            client.callTool({ name: "everything__no-such-tool", arguments: {} }),
            (error: unknown) => {
              assert.ok(error instanceof McpError);
              assert.equal(error.code, -32602);
              assert.equal((error.data as { code: string }).code, "unknown_tool");
              assert.match(error.message, /Unknown tool "everything__no-such-tool"/);
              return true;
            },
          );
          await assert.rejects(
            client.callTool({ name: "everything__get-env", arguments: {} }),
            (error: unknown) => {
              assert.ok(error instanceof McpError);
              assert.equal(error.code, -32600);
              assert.equal((error.data as { code: string }).code, "tool_denied");
              return true;
            },
          );
          // Still serving after both refusals.
          const echo = await client.callTool({
            name: "everything__echo",
            arguments: { message: "ok" },
          });
          assert.deepEqual(echo.content, [{ type: "text", text: "Echo: ok" }]);
        });
      });
    }
  },
);

Deno.test(
  "Over stdio, a tools/call frame the SDK's schema refuses is answered with -32600, not dropped",
  SANITIZED,
  async () => {
    const child = spawnStdioGateway();
    const writer = child.stdin.getWriter();
    const frames = new FrameReader(child.stdout);
    const encoder = new TextEncoder();
    const send = (message: unknown) => writer.write(encoder.encode(JSON.stringify(message) + "\n"));
    try {
      await send(initializeRequest("2025-11-25", 0));
      await frames.next();
      await send({ jsonrpc: "2.0", method: "notifications/initialized" });
      const refused = [
        { name: "system_status", _meta: "not an object" },
        { name: "system_status", _meta: { progressToken: 1.5 } },
        { name: "system_status", _meta: { "io.modelcontextprotocol/related-task": "t" } },
      ];
      for (const [i, params] of refused.entries()) {
        await send({ jsonrpc: "2.0", id: i + 1, method: "tools/call", params });
        const frame = await frames.next();
        assert.equal(frame.id, i + 1, JSON.stringify(params));
        assert.equal((frame.error as { code: number }).code, -32600, JSON.stringify(params));
      }
      await send({
        jsonrpc: "2.0",
        id: 9,
        method: "tools/call",
        params: { name: "system_status" },
        extra: true,
      });
      const extra = await frames.next();
      assert.equal(extra.id, 9);
      assert.equal((extra.error as { code: number }).code, -32600);
    } finally {
      await writer.close();
      await frames.cancel();
    }
    const status = await child.close();
    assert.equal(status.code, 0);
  },
);
