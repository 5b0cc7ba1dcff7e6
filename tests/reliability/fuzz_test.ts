/**
 * A seeded, reproducible fuzzer: hostile JSON-RPC frames over stdio and HTTP, and random documents
 * to the fleet and policy loaders. Zero crashes, zero hangs: after every batch the gateway must
 * still answer a ping. `FUZZ_SEED=<n>` reproduces a run; `FUZZ_FRAMES=<n>` scales it.
 */
import assert from "node:assert/strict";
import { stringify } from "yaml";
import { GatewayError } from "../../core/support/errors.ts";
import { parsePolicies } from "../../core/governance/policy_loader.ts";
import { parseFleetConfig } from "../../core/proxy/fleet_config.ts";
import { FrameReader, spawnStdioGateway } from "../support/child_gateway.ts";
import { initializeRequest, openSession, startGateway } from "../support/gateway.ts";

const SEED = Number(Deno.env.get("FUZZ_SEED") ?? "20261129");
const FRAMES = Number(Deno.env.get("FUZZ_FRAMES") ?? "6000");

/** mulberry32: small, fast, reproducible. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  return { next, int, pick };
}

type Rng = ReturnType<typeof prng>;

const METHODS = [
  "ping",
  "tools/list",
  "tools/call",
  "resources/read",
  "resources/list",
  "prompts/get",
  "completion/complete",
  "logging/setLevel",
  "initialize",
  "notifications/initialized",
  "notifications/cancelled",
  "no/such/method",
  "",
  "__proto__",
  "constructor",
];

function randomValue(rng: Rng, depth = 0): unknown {
  switch (rng.int(depth > 3 ? 6 : 9)) {
    case 0:
      return null;
    case 1:
      return rng.int(2) === 0;
    case 2:
      return rng.pick([0, -1, 1e308, -1e308, 2 ** 53 + 1, 0.5, Number.MAX_SAFE_INTEGER]);
    case 3:
      return rng.pick(["", "x", "\u0000", "\ud800", "é", "__proto__", "a".repeat(rng.int(5000))]);
    case 4:
      return "s" + rng.int(1e6);
    case 5:
      return [];
    case 6:
      return Array.from({ length: rng.int(5) }, () => randomValue(rng, depth + 1));
    case 7: {
      const o: Record<string, unknown> = {};
      for (let i = rng.int(5); i > 0; i--) {
        o[
          rng.pick(["name", "arguments", "uri", "cursor", "__proto__", "constructor", "_meta", "x"])
        ] = randomValue(rng, depth + 1);
      }
      return o;
    }
    default:
      return JSON.parse(
        '{"__proto__": {"polluted": true}, "constructor": {"prototype": {"p": 1}}}',
      );
  }
}

function nested(depth: number): string {
  return "[".repeat(depth) + "]".repeat(depth);
}

/** One hostile frame (a line of text, without the newline). */
function hostileFrame(rng: Rng): string {
  switch (rng.int(12)) {
    case 0:
      return "not json " + rng.int(1e9);
    case 1:
      return JSON.stringify({
        jsonrpc: rng.pick(["1.0", 2, null, "2.0 "]),
        id: rng.int(100),
        method: "ping",
      });
    case 2:
      return JSON.stringify({ jsonrpc: "2.0", id: randomValue(rng), method: rng.pick(METHODS) });
    case 3:
      return JSON.stringify({
        jsonrpc: "2.0",
        id: rng.int(5),
        method: rng.pick(METHODS),
        params: randomValue(rng),
      });
    case 4:
      return JSON.stringify({
        jsonrpc: "2.0",
        method: rng.pick(METHODS),
        params: randomValue(rng),
      });
    case 5:
      return JSON.stringify(
        Array.from({ length: rng.int(50) }, () => ({ jsonrpc: "2.0", id: 1, method: "ping" })),
      );
    case 6:
      return `{"jsonrpc":"2.0","id":1,"method":"ping","params":${
        nested(rng.pick([10, 500, 5000]))
      }}`;
    case 7:
      return JSON.stringify({
        jsonrpc: "2.0",
        id: 7,
        method: "tools/call",
        params: { name: "system_status", arguments: randomValue(rng) },
      });
    case 8:
      return JSON.stringify({ jsonrpc: "2.0", id: 8, result: randomValue(rng) });
    case 9:
      return JSON.stringify({ jsonrpc: "2.0", id: 9, error: randomValue(rng) });
    case 10:
      return '{"jsonrpc":"2.0","id":10,"method":"ping","__proto__":{"admin":true}}';
    default:
      return JSON.stringify({
        jsonrpc: "2.0",
        id: "dup",
        method: "tools/list",
        params: { cursor: "x".repeat(rng.int(3000)) },
      });
  }
}

const encoder = new TextEncoder();

Deno.test(`fuzz: hostile frames over stdio never crash or hang the gateway (seed ${SEED})`, async () => {
  const rng = prng(SEED);
  const child = spawnStdioGateway({
    MCP_MAX_MESSAGE_BYTES: String(1 << 20),
    MCP_LOG_LEVEL: "error",
  });
  const writer = child.stdin.getWriter();
  const frames = new FrameReader(child.stdout);
  let sent = 0;
  try {
    await writer.write(
      encoder.encode(JSON.stringify(initializeRequest("2025-11-25", "init")) + "\n"),
    );
    while ((await frames.next()).id !== "init") { /* skip */ }
    await writer.write(
      encoder.encode(
        JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n",
      ),
    );
    for (let batch = 0; sent < FRAMES; batch++) {
      const lines: string[] = [];
      for (let i = 0; i < 200 && sent < FRAMES; i++, sent++) lines.push(hostileFrame(rng));
      // Invalid UTF-8 and an oversized frame now and then.
      const chunks = [encoder.encode(lines.join("\n") + "\n")];
      if (batch % 5 === 0) chunks.push(new Uint8Array([0xff, 0xfe, 0x7b, 0x0a]));
      if (batch % 7 === 0) chunks.push(encoder.encode(`{"pad":"${"x".repeat(1 << 20)}"}\n`));
      for (const chunk of chunks) await writer.write(chunk);
      const probe = `alive-${batch}`;
      await writer.write(
        encoder.encode(JSON.stringify({ jsonrpc: "2.0", id: probe, method: "ping" }) + "\n"),
      );
      const deadline = Date.now() + 20_000;
      for (;;) {
        assert.ok(
          Date.now() < deadline,
          `no answer to ${probe} after ${sent} frames: the gateway hangs`,
        );
        const frame = await frames.next();
        if (frame.id === probe) {
          assert.deepEqual(frame.result, {});
          break;
        }
      }
    }
  } finally {
    await writer.close().catch(() => {});
    await frames.cancel();
  }
  const status = await child.close();
  assert.equal(
    status.code,
    0,
    `the gateway exited with ${status.code} after ${sent} frames:\n${
      (await child.stderr).slice(-2000)
    }`,
  );
});

Deno.test(`fuzz: hostile bodies over Streamable HTTP never get a 5xx or stop the gateway (seed ${SEED})`, async () => {
  const rng = prng(SEED + 1);
  const gateway = await startGateway({
    MCP_HTTP_RESPONSE_MODE: "json",
    MCP_MAX_MESSAGE_BYTES: String(1 << 20),
  });
  try {
    const headers = await openSession(gateway);
    const total = Math.ceil(FRAMES * 2 / 3);
    const statuses = new Map<number, number>();
    for (let i = 0; i < total; i += 20) {
      await Promise.all(Array.from({ length: Math.min(20, total - i) }, async () => {
        const body = hostileFrame(rng);
        const response = await fetch(`${gateway.url}/mcp`, {
          method: "POST",
          headers,
          body,
          // A request that never answers is a hang: fail naming the frame instead of waiting.
          signal: AbortSignal.timeout(15_000),
        }).catch((error) => assert.fail(`no answer to ${body.slice(0, 300)}: ${error}`));
        await response.body?.cancel();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        assert.ok(response.status < 500, `a hostile body got ${response.status}`);
      }));
    }
    const ping = await fetch(`${gateway.url}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify({ jsonrpc: "2.0", id: "alive", method: "ping" }),
    });
    assert.deepEqual(await ping.json(), { jsonrpc: "2.0", id: "alive", result: {} });
    assert.ok([...statuses.values()].reduce((a, b) => a + b, 0) >= total);
  } finally {
    await gateway.stop();
  }
});

Deno.test(`fuzz: random documents to the fleet and policy loaders fail only with config_invalid (seed ${SEED})`, () => {
  const rng = prng(SEED + 2);
  const shapes = [
    () => ({
      proxy_servers: [randomValue(rng), { id: randomValue(rng), command: randomValue(rng) }],
    }),
    () => ({ proxy_servers: randomValue(rng) }),
    () => ({
      tenants: { [String(randomValue(rng))]: randomValue(rng) },
      connectors: randomValue(rng),
    }),
    () => ({
      tenants: {
        acme: {
          allow: randomValue(rng),
          arguments: randomValue(rng),
          rate_limits: randomValue(rng),
        },
      },
    }),
    () => randomValue(rng),
  ];
  for (let i = 0; i < 2000; i++) {
    let text: string;
    try {
      text = rng.int(10) === 0
        ? "key: [unclosed\n  - " + rng.int(1e6)
        : stringify(rng.pick(shapes)());
    } catch {
      continue; // the generator made something YAML cannot express
    }
    for (
      const parse of [
        () =>
          parseFleetConfig(text, "fuzz.yaml", {}, { separator: "__", healthIntervalSeconds: 30 }),
        () => parsePolicies([{ path: "fuzz.yaml", text }]),
      ]
    ) {
      try {
        parse();
      } catch (error) {
        assert.ok(
          error instanceof GatewayError && error.code === "config_invalid",
          `document ${i} raised ${error instanceof Error ? error.stack : error}:\n${
            text.slice(0, 500)
          }`,
        );
      }
    }
  }
});
