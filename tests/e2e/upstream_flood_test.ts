/**
 * An upstream flooding the gateway, or answering without end, costs it bounded memory and leaves
 * the rest of the fleet serving: a real hostile upstream process beside a calm one, behind a real
 * gateway, its real relay workers and real SDK clients in two sessions. Over stdio
 * (tests/fixtures/upstreams/log_flood_server.ts) and over Streamable HTTP and legacy HTTP+SSE
 * (tests/fixtures/upstreams/http_flood_server.ts).
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { eventually, fixture, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;
const stdioEntry = (id: string) => `
  - id: ${id}
    command: ${
  JSON.stringify(["deno", "run", "--config", DENO_JSON, fixture("upstreams/log_flood_server.ts")])
}
    sandbox: deno
`;
/** How long a flood runs while the other upstream is called. */
const FLOOD_MS = 10_000;
/** Generous: a call to a calm upstream answers in milliseconds when the gateway is not swamped. */
const CALL_DEADLINE_MS = 5_000;
/**
 * Unbounded, a flood grew the process by gigabytes (1.3 → 5.0 GB in 30 s over stdio); bounded,
 * ~50–320 MB, with short-lived garbage between full collections that reached ~450 MB in a busy
 * suite.
 */
const RSS_GROWTH_LIMIT = 1024 * 1024 * 1024;

type Kind = "http" | "sse";

/** A running HTTP fixture process. */
interface FloodServer {
  url(kind: Kind): string;
  close(): Promise<void>;
}

/** The HTTP fixture: hostile, or `calm` (only an echo, named `steady`). */
async function startFloodServer(...args: string[]): Promise<FloodServer> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-lock",
      "--allow-net=127.0.0.1",
      fixture("upstreams/http_flood_server.ts"),
      ...args,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the flood server exited before listening");
    text += value;
  }
  const { port } = JSON.parse(text.slice(0, text.indexOf("\n"))) as { port: number };
  return {
    url: (kind) => `http://127.0.0.1:${port}/${kind === "http" ? "mcp" : "sse"}`,
    close: async () => {
      child.kill("SIGKILL");
      await reader.cancel().catch(() => {});
      await child.status;
    },
  };
}

function text(result: unknown): string {
  return (result as CallToolResult).content.map((c) => c.type === "text" ? c.text : "").join("");
}

/** Runs `fn` with a gateway on `fleet` and two sessions, `victim` warmed up by calling `echo`. */
async function withGateway(
  fleet: string,
  echo: string,
  fn: (ctx: { gateway: TestGateway; attacker: Client; victim: Client }) => Promise<void>,
): Promise<void> {
  const file = await writeFleet(fleet);
  // The operator log is not kept: the test measures the gateway, not its log buffer.
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: file.path }, {
    keepLog: () => false,
  });
  try {
    await gateway.kernel.fleetStarted;
    const attacker = await connectHttp(gateway);
    const victim = await connectHttp(gateway);
    try {
      assert.equal(
        text(await victim.callTool({ name: echo, arguments: { text: "warm" } })),
        "warm",
      );
      await fn({ gateway, attacker, victim });
    } finally {
      await attacker.close();
      await victim.close();
    }
  } finally {
    await gateway.stop();
    await file.remove();
  }
}

/** Runs `fn` with a hostile HTTP upstream `flood` and a calm one `calm`, both over `kind`. */
async function withFloodServers(
  kind: Kind,
  fn: (ctx: { gateway: TestGateway; attacker: Client; victim: Client }) => Promise<void>,
): Promise<void> {
  const hostile = await startFloodServer();
  const calm = await startFloodServer("calm");
  // Restarts after a second, not the default 30 s: one test waits for a reconnection.
  const entry = (id: string, server: FloodServer) => `
  - id: ${id}
    transport: ${kind}
    url: ${server.url(kind)}
    breaker: { base: 1 }
`;
  try {
    await withGateway(
      `proxy_servers:${entry("flood", hostile)}${entry("calm", calm)}`,
      "calm__steady",
      fn,
    );
  } finally {
    await hostile.close();
    await calm.close();
  }
}

/** Calls `tool` (an echo) for `ms`, each call within its deadline; the peak RSS growth seen. */
async function callThrough(victim: Client, tool: string, baseline: number): Promise<number> {
  const started = Date.now();
  let peak = baseline;
  let calls = 0;
  while (Date.now() - started < FLOOD_MS) {
    const answer = await victim.callTool(
      { name: tool, arguments: { text: `call ${calls}` } },
      undefined,
      { timeout: CALL_DEADLINE_MS },
    ).then(text, (error) => `no answer: ${error}`);
    assert.equal(answer, `call ${calls}`, `call ${calls} during the flood`);
    calls++;
    peak = Math.max(peak, Deno.memoryUsage().rss);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.ok(calls >= 10, `only ${calls} calls answered during the flood`);
  return peak - baseline;
}

function assertBounded(growth: number, what: string): void {
  assert.ok(growth < RSS_GROWTH_LIMIT, `RSS grew ${(growth / 1e6).toFixed(0)} MB during ${what}`);
}

Deno.test("A stdio upstream flooding log notifications without end leaves another session's calls to another upstream answered and the gateway's memory bounded", async () => {
  const fleet = `proxy_servers:${stdioEntry("flood")}${stdioEntry("calm")}`;
  await withGateway(fleet, "calm__echo", async ({ attacker, victim }) => {
    const baseline = Deno.memoryUsage().rss;
    assert.equal(
      text(await attacker.callTool({ name: "flood__flood", arguments: {} })),
      "flooding",
    );
    assertBounded(await callThrough(victim, "calm__echo", baseline), "the flood");
  });
});

for (const kind of ["http", "sse"] as const) {
  Deno.test(`An ${kind} upstream flooding notifications on its event stream without end leaves another session's calls answered and the gateway's memory bounded`, async () => {
    await withFloodServers(kind, async ({ attacker, victim }) => {
      const baseline = Deno.memoryUsage().rss;
      assert.equal(
        text(await attacker.callTool({ name: "flood__flood", arguments: {} })),
        "flood",
      );
      assertBounded(await callThrough(victim, "calm__steady", baseline), "the flood");
    });
  });
}

for (const what of ["body", "event"] as const) {
  Deno.test(`An http upstream's answer whose ${what} never ends fails that call at the message bound, naming it, and its session serves on`, async () => {
    await withFloodServers("http", async ({ attacker }) => {
      const baseline = Deno.memoryUsage().rss;
      await assert.rejects(
        attacker.callTool({ name: `flood__endless_${what}`, arguments: {} }, undefined, {
          timeout: CALL_DEADLINE_MS,
        }),
        new RegExp(
          `answered with a message it could not relay \\(an? ${what} of more than \\d+ bytes\\)` +
            ".*MCP_MAX_MESSAGE_BYTES",
        ),
      );
      assertBounded(Deno.memoryUsage().rss - baseline, `an endless ${what}`);
      assert.equal(
        text(await attacker.callTool({ name: "flood__echo", arguments: { text: "after" } })),
        "after",
      );
    });
  });
}

Deno.test("An sse upstream's event that never ends ends its session at the message bound, and the gateway connects it again", async () => {
  await withFloodServers("sse", async ({ gateway, attacker, victim }) => {
    const baseline = Deno.memoryUsage().rss;
    await assert.rejects(
      attacker.callTool({ name: "flood__endless_event", arguments: {} }, undefined, {
        timeout: CALL_DEADLINE_MS,
      }),
      /closed the connection during tools\/call/,
    );
    assertBounded(Deno.memoryUsage().rss - baseline, "an endless event");
    const status = () => gateway.kernel.proxy.status().find((s) => s.id === "flood");
    assert.match(status()?.lastError ?? "", /the upstream sent an event of more than \d+ bytes/);
    await eventually(() => status()?.state === "READY", "the upstream connected again");
    assert.equal(
      text(await attacker.callTool({ name: "flood__echo", arguments: { text: "again" } })),
      "again",
    );
    assert.equal(
      text(await victim.callTool({ name: "calm__steady", arguments: { text: "after" } })),
      "after",
    );
  });
});

Deno.test("An http upstream that keeps each call's stream open (after its answer, without one, trickling its JSON body, or in a resumption) holds none once the call is answered or cancelled", async () => {
  await withFloodServers("http", async ({ attacker }) => {
    const open = async () =>
      Number(text(await attacker.callTool({ name: "flood__open_streams", arguments: {} })));
    for (let i = 0; i < 20; i++) {
      assert.equal(
        text(await attacker.callTool({ name: "flood__linger", arguments: {} })),
        "linger",
      );
    }
    for (let i = 0; i < 5; i++) {
      await assert.rejects(
        attacker.callTool({ name: "flood__hang", arguments: {} }, undefined, { timeout: 200 }),
        /timed out/i,
      );
    }
    for (const tool of ["drip", "hang_primed"]) {
      for (let i = 0; i < 5; i++) {
        await assert.rejects(
          attacker.callTool({ name: `flood__${tool}`, arguments: {} }, undefined, { timeout: 200 }),
          /timed out/i,
        );
      }
    }
    // Past the reconnection delay the primed streams asked for (10 ms): a resumption would be open.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await eventually(async () => (await open()) === 0, "every stream let go");
    // Letting a trickling answer go fails nothing else: the session serves on.
    assert.equal(
      text(await attacker.callTool({ name: "flood__echo", arguments: { text: "after" } })),
      "after",
    );
  });
});
