/**
 * Checking a caller's input cannot stall the gateway: it checks callers' arguments against its
 * tools' `inputSchema`, and callers' resource URIs against its quarantined templates, on its main
 * thread, so a pattern with catastrophic backtracking (`^(a+)+$`, or a template's adjacent
 * variables) and a caller's `aaaa…!`, or a schema's `uniqueItems` and a caller's long array, froze
 * every session of every tenant. A real gateway process, real upstream processes.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { spawnHttpChild } from "../support/child_gateway.ts";
import { eventually, faultServer, fixture, writeFleet } from "../support/fleet.ts";

const ROOT_CONFIG = new URL("../../deno.json", import.meta.url).pathname;

/** `promise`, or a failure saying what did not answer within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} got no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A client of `gateway` over Streamable HTTP with `token`. */
async function connect(gateway: { url: string }, token: string): Promise<Client> {
  const client = new Client({ name: "e2e", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

const TOKEN = "validation-stall-token";

/**
 * Runs `fn` with two sessions (the attacker's and another caller's) of a gateway child process
 * serving the fleet `servers`, and cleans up whatever happens.
 */
async function withTwoSessions(
  servers: string,
  fn: (attacker: Client, other: Client) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  const fleet = await writeFleet(`proxy_servers:${servers}`);
  const gateway = await spawnHttpChild({
    MCP_SERVER_AUTH_TOKEN: TOKEN,
    MCP_PROXY_CONFIG_PATH: fleet.path,
    ...env,
  });
  const clients: Client[] = [];
  try {
    clients.push(await connect(gateway, TOKEN), await connect(gateway, TOKEN));
    await fn(clients[0]!, clients[1]!);
  } finally {
    for (const client of clients) await client.close();
    await gateway.close();
    await fleet.remove();
  }
}

Deno.test("A tool's pattern that backtracks catastrophically is checked in linear time: the hostile call is refused at once and every other call is answered", async () => {
  await withTwoSessions(faultServer("f"), async (attacker, other) => {
    // V8 alone needs seconds for 26 a's and twice as long for each one more: hours for 48.
    const hostile = attacker.callTool({
      name: "f__match",
      arguments: { name: "a".repeat(48) + "!" },
    });
    const refused = await within(
      hostile.then(() => assert.fail("the call must be refused"), (e: McpError) => e),
      20_000,
      "the hostile call",
    );
    assert.equal((refused.data as { code?: string }).code, "invalid_arguments");
    assert.match(refused.message, /name must match pattern "\^\(a\+\)\+\$"/);
    const ok = await within(other.callTool({ name: "f__ok", arguments: {} }), 20_000, "f__ok");
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
    const echoed = await within(
      attacker.callTool({ name: "f__match", arguments: { name: "aaa" } }),
      20_000,
      "a matching call",
    );
    assert.deepEqual(echoed.content, [{ type: "text", text: "aaa" }]);
  });
});

Deno.test("uniqueItems is checked in linear time: a caller's 30,000 distinct items are counted upstream at once, and duplicates refused", async () => {
  await withTwoSessions(faultServer("f"), async (caller, other) => {
    // ajv compared every pair: 16,000 objects took 16 s, 30,000 about a minute.
    const tags = Array.from({ length: 30_000 }, (_, a) => ({ a }));
    const counted = await within(
      caller.callTool({ name: "f__unique", arguments: { tags } }),
      20_000,
      "30,000 distinct tags",
    );
    assert.deepEqual(counted.content, [{ type: "text", text: "30000" }]);
    const ok = await within(other.callTool({ name: "f__ok", arguments: {} }), 20_000, "f__ok");
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
    const refused = await caller.callTool({
      name: "f__unique",
      arguments: { tags: [{ a: 1 }, { a: 2 }, { a: 1 }] },
    }).then(() => assert.fail("duplicates must be refused"), (e: McpError) => e);
    assert.equal((refused.data as { code?: string }).code, "invalid_arguments");
    assert.match(refused.message, /tags must NOT have duplicate items \(items ## 0 and 2/);
  });
});

/** The refusal of a call that must be refused, within 20 s. */
function refusal(call: Promise<unknown>, what: string): Promise<McpError> {
  return within(
    call.then(() => assert.fail(`${what}: the call must be refused`), (e: McpError) => e),
    20_000,
    what,
  );
}

Deno.test("Large arguments are checked up to their first problem: 10,000 records failing 100 branches each are refused at once, without the gateway collecting a million errors", async () => {
  await withTwoSessions(faultServer("f"), async (attacker, other) => {
    // Every error collected: 50,000 such records took 8 s and 1.2 GB of heap; 500,000 ran the
    // gateway out of memory. (Many more are refused unchecked as too costly: a test below.)
    const records = Array.from({ length: 10_000 }, () => ({}));
    const refused = await refusal(
      attacker.callTool({ name: "f__wide", arguments: { records } }),
      "10,000 failing records",
    );
    assert.equal((refused.data as { code?: string }).code, "invalid_arguments");
    assert.match(refused.message, /checked up to their first problem/);
    const ok = await within(other.callTool({ name: "f__ok", arguments: {} }), 20_000, "f__ok");
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
  });
});

Deno.test("A quarantined template whose variables backtrack polynomially is checked in linear time: a hostile read is answered and every other call too", async () => {
  const stall = `
  - id: stall
    command: ["deno", "run", "--config", ${JSON.stringify(ROOT_CONFIG)}, ${
    JSON.stringify(fixture("upstreams/stall_template_server.ts"))
  }]
    sandbox: deno
    permissions: { read: true }
`;
  await withTwoSessions(stall + faultServer("f"), async (attacker, other) => {
    // Quarantined once scanned: an instance of the template is refused.
    await eventually(
      () =>
        attacker.readResource({ uri: "proxy://stall/stall://abcdefgh" }).then(
          () => false,
          (e: McpError) => (e.data as { code?: string } | undefined)?.code === "quarantined",
        ),
      "the scanner to quarantine the template",
      60_000,
    );
    // Not an instance (no variable takes a "/"): V8 tried every split of 2,000 characters
    // among eight variables before saying so.
    const hostile = "proxy://stall/stall://" + "a".repeat(2_000) + "/";
    const read = await within(attacker.readResource({ uri: hostile }), 20_000, "the hostile read");
    assert.deepEqual(read.contents.map((c) => "text" in c ? c.text : c.blob), ["read"]);
    const ok = await within(other.callTool({ name: "f__ok", arguments: {} }), 20_000, "f__ok");
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
  });
});

Deno.test("Arguments too costly to check against their schema are refused unchecked: 300,000 valid records of 100 shapes, then a call of ordinary size is answered", async () => {
  await withTwoSessions(faultServer("f"), async (attacker, other) => {
    // Each record matches only the last of 100 branches, so ajv tried every one: 500,000 records
    // held the main thread 3.7 s, every session of every tenant waiting.
    const record = { k99: 1 };
    const records = Array.from({ length: 300_000 }, () => record);
    const refused = await refusal(
      attacker.callTool({ name: "f__wide", arguments: { records } }),
      "300,000 costly records",
    );
    assert.equal((refused.data as { code?: string }).code, "invalid_arguments");
    assert.match(
      refused.message,
      /were not checked: .*MCP_MAX_SCHEMA_WORK.*send smaller arguments/,
    );
    const ok = await within(other.callTool({ name: "f__ok", arguments: {} }), 20_000, "f__ok");
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
    const counted = await within(
      attacker.callTool({ name: "f__wide", arguments: { records: records.slice(0, 1_000) } }),
      20_000,
      "1,000 records",
    );
    assert.deepEqual(counted.content, [{ type: "text", text: "1000" }]);
  });
});

Deno.test("An upstream schema whose $refs double at every level is quarantined by the scanner (costly-schema), and every other call is answered", async () => {
  const costly = faultServer("f", { fault: "costly-schema" });
  await withTwoSessions(costly + faultServer("g"), async (attacker, other) => {
    await eventually(
      () =>
        attacker.callTool({ name: "f__ok", arguments: {} }).then(
          () => false,
          (e: McpError) =>
            (e.data as { code?: string } | undefined)?.code === "quarantined" &&
            // The rule's id reads [redacted] here: it is also this fixture's FAULT value, and
            // fleet env values are redacted as secrets.
            /costs more than 10,000,000 units of work to check even empty arguments/.test(
              e.message,
            ),
        ),
      "the scanner to quarantine f__ok",
    );
    assert.ok(!(await attacker.listTools()).tools.some((t) => t.name === "f__ok"));
    const ok = await within(other.callTool({ name: "g__ok", arguments: {} }), 20_000, "g__ok");
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
  });
});

Deno.test("With the scanner's quarantine off, a call of the doubling schema is refused at once by the work bound, and every other call is answered", async () => {
  const costly = faultServer("f", { fault: "costly-schema" });
  await withTwoSessions(costly + faultServer("g"), async (attacker, other) => {
    // 40 levels of allOf naming the next definition twice: 2^40 checks of `{}` (24 levels took
    // 228 ms; each further level doubles it), the gateway's main thread held for days.
    await eventually(
      async () => (await attacker.listTools()).tools.some((t) => t.name === "f__ok"),
      "f__ok listed",
    );
    const refused = await refusal(
      attacker.callTool({ name: "f__ok", arguments: {} }),
      "a call of the doubling schema",
    );
    assert.equal((refused.data as { code?: string }).code, "invalid_arguments");
    assert.match(refused.message, /the schema costs more than .* must be simplified/);
    const ok = await within(other.callTool({ name: "g__ok", arguments: {} }), 20_000, "g__ok");
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
  }, { MCP_SCANNER_BLOCK: "off" });
});

Deno.test("Arguments nested past 512 levels are refused invalid_arguments naming the limit, and the session goes on", async () => {
  await withTwoSessions(faultServer("f"), async (caller) => {
    // 5,000 levels overflowed the check's recursive steps: -32603 policy_error, "Maximum call stack
    // size exceeded", nothing audited.
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 5_000; i++) deep = { a: deep };
    const refused = await refusal(
      caller.callTool({ name: "f__ok", arguments: { deep } }),
      "5,000 levels",
    );
    assert.equal((refused.data as { code?: string }).code, "invalid_arguments");
    assert.match(refused.message, /nested more than 512 levels deep; flatten them/);
    const ok = await within(caller.callTool({ name: "f__ok", arguments: {} }), 20_000, "f__ok");
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
  });
});

Deno.test("An upstream that keeps listing new schemas gets only its budget of validation code compiled: past it, its new schemas are refused naming the bound, the rest still answer", async () => {
  // V8 keeps the source of every function compiled for the process's life (~2 bytes of heap a
  // byte of code), so fresh large schemas, each called once, grew the heap without end.
  const schemas = `
  - id: s
    command: ["deno", "run", "--config", ${JSON.stringify(ROOT_CONFIG)}, ${
    JSON.stringify(fixture("upstreams/catalog_server.ts"))
  }, "schemas"]
`;
  await withTwoSessions(schemas + faultServer("f"), async (caller, other) => {
    await eventually(
      async () => (await caller.listTools()).tools.some((t) => t.name === "s__s19"),
      "the schemas upstream listed",
    );
    // ~100 KB of code each against a 64 KiB budget: the first compiles, the second does not.
    const first = await within(
      caller.callTool({ name: "s__s0", arguments: {} }),
      20_000,
      "s__s0",
    );
    assert.deepEqual(first.content, [{ type: "text", text: "called s0" }]);
    const refused = await refusal(caller.callTool({ name: "s__s1", arguments: {} }), "s__s1");
    assert.equal((refused.data as { code?: string }).code, "invalid_arguments");
    assert.match(
      refused.message,
      /upstream "s" has had [\d.]+ MB of validation code compiled .*MCP_MAX_SCHEMA_CODE_PER_UPSTREAM/,
    );
    const again = await within(caller.callTool({ name: "s__s0", arguments: {} }), 20_000, "again");
    assert.deepEqual(again.content, first.content, "what it compiled still serves");
    const ok = await within(other.callTool({ name: "f__ok", arguments: {} }), 20_000, "f__ok");
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
  }, { MCP_MAX_SCHEMA_CODE_PER_UPSTREAM: "65536" });
});
