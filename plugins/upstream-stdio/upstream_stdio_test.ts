/**
 * upstream-stdio end to end: the kernel's SDK Client → WorkerTransport → relay worker → a real
 * child process, for the reference servers and for fixtures that probe the sandbox and the
 * lifecycle.
 * @module
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../../core/support/errors.ts";
import type {
  UpstreamAdapter,
  UpstreamPlan,
  UpstreamServerSpec,
} from "../../core/plugin_api/mod.ts";
import { WorkerTransport } from "../../core/proxy/worker_transport.ts";
import {
  cacheNpm,
  SERVER_EVERYTHING,
  SERVER_MEMORY,
} from "../../tests/fixtures/upstreams/reference_server.ts";
import {
  LINUX,
  type LogEntry,
  processAlive,
  processGroup,
  recordingLogger,
  testBaseEnv,
  testPluginContext,
  waitFor,
} from "../../tests/fixtures/upstreams/support.ts";
import plugin from "./mod.ts";

const REPO_ROOT = new URL("../../", import.meta.url).pathname;
const FIXTURES = new URL("../../tests/fixtures/upstreams/", import.meta.url).pathname;
const DENO_JSON = `${REPO_ROOT}deno.json`;
const MAX_MESSAGE_BYTES = 1024 * 1024;

async function adapter(): Promise<UpstreamAdapter> {
  return await plugin.create(testPluginContext(recordingLogger().logger));
}

function server(overrides: Partial<UpstreamServerSpec>): UpstreamServerSpec {
  return {
    id: "test",
    transport: "stdio",
    headers: {},
    env: {},
    permissions: {},
    sandbox: "none",
    ...overrides,
  };
}

async function plan(spec: UpstreamServerSpec, maxMessageBytes = MAX_MESSAGE_BYTES) {
  const a = await adapter();
  return { adapter: a, plan: a.plan(spec, { maxMessageBytes, baseEnv: testBaseEnv() }) };
}

function transportFor(
  workerUrl: string,
  upstreamPlan: UpstreamPlan,
  serverId: string,
  options: { stopGraceMs?: number; startTimeoutMs?: number } = {},
) {
  const { logger, entries } = recordingLogger();
  const transport = new WorkerTransport({
    workerUrl,
    plan: upstreamPlan,
    serverId,
    logger,
    startTimeoutMs: options.startTimeoutMs ?? 30_000,
    ...(options.stopGraceMs !== undefined ? { stopGraceMs: options.stopGraceMs } : {}),
  });
  return { transport, entries };
}

async function connect(spec: UpstreamServerSpec) {
  const { adapter: a, plan: p } = await plan(spec);
  const { transport, entries } = transportFor(a.workerUrl, p, spec.id);
  const client = new Client({ name: "upstream-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport, entries };
}

function text(result: unknown): string {
  const content = (result as CallToolResult).content[0];
  assert.equal(content?.type, "text");
  return content.type === "text" ? content.text : "";
}

function stderrLines(entries: LogEntry[]): string[] {
  return entries.filter((e) => e.message === "upstream stderr").map((e) => String(e.fields.line));
}

Deno.test("upstream-stdio serves server-everything under sandbox deno to an SDK Client", async () => {
  await cacheNpm(SERVER_EVERYTHING);
  const { client, transport } = await connect(server({
    id: "everything",
    // --no-config: the package runs without this repo's deno.json and never writes its deno.lock.
    command: ["deno", "run", "--no-config", `npm:${SERVER_EVERYTHING}`, "stdio"],
    sandbox: "deno",
    // Just enough: the three variables it reads at import time. (Its instructions file would also
    // need read access to its own docs folder in Deno's npm cache; without it the server says so.)
    permissions: {
      env: ["GZIP_MAX_FETCH_SIZE", "GZIP_MAX_FETCH_TIME_MILLIS", "GZIP_ALLOWED_DOMAINS"],
    },
  }));
  try {
    assert.equal(client.getServerVersion()?.name, "mcp-servers/everything");
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "echo"), "server-everything lists echo");
    const result = await client.callTool({ name: "echo", arguments: { message: "hi there" } });
    assert.equal(text(result), "Echo: hi there");
    assert.equal(typeof transport.pid, "number");
  } finally {
    await client.close();
  }
  if (LINUX) assert.equal(processAlive(transport.pid!), false);
});

Deno.test("upstream-stdio serves server-memory under sandbox deno with env, read and write of its directory only", async () => {
  await cacheNpm(SERVER_MEMORY);
  const dir = await Deno.makeTempDir();
  const { client } = await connect(server({
    id: "memory",
    command: ["npx", "-y", SERVER_MEMORY],
    sandbox: "deno",
    env: { MEMORY_FILE_PATH: `${dir}/memory.jsonl` },
    // It reads MEMORY_FILE_PATH, and saves through a temp file renamed over the graph file.
    permissions: { env: ["MEMORY_FILE_PATH"], read: [dir], write: [dir] },
  }));
  try {
    await client.callTool({
      name: "create_entities",
      arguments: { entities: [{ name: "gateway", entityType: "service", observations: ["up"] }] },
    });
    const graph = JSON.parse(text(await client.callTool({ name: "read_graph", arguments: {} })));
    assert.deepEqual(graph.entities.map((e: { name: string }) => e.name), ["gateway"]);
    assert.match(await Deno.readTextFile(`${dir}/memory.jsonl`), /"gateway"/);
  } finally {
    await client.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("A command outside the relay worker's run permission fails start with an error naming it", async () => {
  const { adapter: a, plan: p } = await plan(
    server({ id: "sneaky", command: ["sh", "-c", "true"] }),
  );
  // The worker may run only /bin/true: Deno, not our code, refuses the spawn.
  const narrowed: UpstreamPlan = { ...p, permissions: { ...p.permissions, run: ["true"] } };
  const { transport } = transportFor(a.workerUrl, narrowed, "sneaky");
  let closes = 0;
  transport.onclose = () => closes++;
  await assert.rejects(transport.start(), (error: unknown) => {
    assert.ok(error instanceof GatewayError);
    assert.equal(error.code, "upstream_error");
    assert.match(error.message, /Upstream "sneaky" failed to start: cannot spawn "sh"/);
    assert.match(error.message, /NotCapable/);
    return true;
  });
  assert.equal(closes, 1);
  await transport.close();
  assert.equal(closes, 1);
});

Deno.test("A command that does not exist fails start with an error naming it", async () => {
  const { adapter: a, plan: p } = await plan(
    server({ id: "typo", command: ["no-such-mcp-server-xyz"] }),
  );
  const { transport } = transportFor(a.workerUrl, p, "typo");
  await assert.rejects(transport.start(), {
    name: "GatewayError",
    code: "upstream_error",
    message:
      /Upstream "typo" failed to start: cannot spawn "no-such-mcp-server-xyz": command not found/,
  });
});

Deno.test("The child sees only the base env and the server's env", async () => {
  const { client } = await connect(server({
    id: "probe",
    command: ["deno", "run", "--config", DENO_JSON, `${FIXTURES}probe_server.ts`],
    cwd: REPO_ROOT,
    sandbox: "deno",
    env: { UPSTREAM_TOKEN: "t0k3n" },
    permissions: { env: true },
  }));
  try {
    const env = JSON.parse(text(await client.callTool({ name: "env", arguments: {} })));
    assert.deepEqual(env, { ...testBaseEnv(), UPSTREAM_TOKEN: "t0k3n" });
  } finally {
    await client.close();
  }
});

Deno.test("A sandbox-deno child cannot read a file outside its read grant", async () => {
  const granted = await Deno.makeTempDir();
  const outside = await Deno.makeTempFile();
  await Deno.writeTextFile(`${granted}/ok.txt`, "inside");
  await Deno.writeTextFile(outside, "secret");
  const { client } = await connect(server({
    id: "reader",
    command: ["deno", "run", "--config", DENO_JSON, `${FIXTURES}probe_server.ts`],
    cwd: REPO_ROOT,
    sandbox: "deno",
    permissions: { read: [granted] },
  }));
  try {
    const inside = await client.callTool({
      name: "read_file",
      arguments: { path: `${granted}/ok.txt` },
    });
    assert.equal(text(inside), "inside");
    const denied = await client.callTool({ name: "read_file", arguments: { path: outside } });
    assert.equal(denied.isError, true);
    assert.match(text(denied), /^NotCapable: Requires read access/);
  } finally {
    await client.close();
    await Deno.remove(granted, { recursive: true });
    await Deno.remove(outside);
  }
});

Deno.test("The stdio relay worker's sandbox allows no network, files, env, sys info or other commands", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  const { plan: p } = await plan(server({
    id: "probed",
    command: ["deno", "run", "server.ts"],
    env: { PROBE_PORT: String(port) },
  }));
  // The stdio adapter's real plan, run by a worker that tries everything a subverted relay might.
  const { transport, entries } = transportFor(
    new URL("sandbox_probe_worker.ts", `file://${FIXTURES}`).href,
    p,
    "probed",
  );
  try {
    await transport.start();
    assert.deepEqual(stderrLines(entries), [
      "probe connect: NotCapable",
      "probe listen: NotCapable",
      "probe read: NotCapable",
      "probe write: NotCapable",
      "probe env: NotCapable",
      "probe sys: NotCapable",
      "probe run: NotCapable",
    ]);
  } finally {
    await transport.close();
    listener.close();
  }
});

Deno.test({
  name: "close() leaves no process of the upstream's process group alive",
  ignore: !LINUX,
  async fn() {
    const { adapter: a, plan: p } = await plan(server({
      id: "forker",
      // A child with a grandchild, like npx → node: both must go.
      command: ["sh", "-c", "sleep 60 & sleep 61; wait"],
    }));
    const { transport } = transportFor(a.workerUrl, p, "forker", { stopGraceMs: 300 });
    await transport.start();
    const pid = transport.pid!;
    await waitFor(() => processGroup(pid).length === 3, "sh and both sleeps");
    await transport.close();
    assert.equal(processAlive(pid), false);
    // SIGKILL is delivered asynchronously: the grandchild may take a moment to disappear.
    await waitFor(() => processGroup(pid).length === 0, "no process left in the group", 2000);
  },
});

Deno.test("A child that exits on its own fires onclose exactly once", async () => {
  const { adapter: a, plan: p } = await plan(
    server({ id: "quitter", command: ["sh", "-c", "exit 3"] }),
  );
  const { transport, entries } = transportFor(a.workerUrl, p, "quitter");
  const closed = Promise.withResolvers<void>();
  let closes = 0;
  transport.onclose = () => {
    closes++;
    closed.resolve();
  };
  await transport.start();
  await closed.promise;
  await transport.close();
  assert.equal(closes, 1);
  assert.deepEqual(transport.closeInfo, {
    reason: "process exited with code 3",
    code: 3,
    signal: null,
  });
  assert.ok(entries.some((e) => e.level === "warn" && e.message === "upstream closed"));
  await assert.rejects(
    transport.send({ jsonrpc: "2.0", id: 1, method: "ping" }),
    { code: "upstream_error", message: /Upstream "quitter" is not connected \(closed\)/ },
  );
});

Deno.test("Garbage, oversized, bad UTF-8 and non-JSON-RPC lines are reported and the next valid message is delivered", async () => {
  const { adapter: a, plan: p } = await plan(
    server({
      id: "noisy",
      command: ["deno", "run", "--no-config", `${FIXTURES}noisy_server.ts`, "5000"],
      sandbox: "deno",
    }),
    4096,
  );
  const { transport, entries } = transportFor(a.workerUrl, p, "noisy");
  const errors: string[] = [];
  const messages: JSONRPCMessage[] = [];
  const reply = Promise.withResolvers<void>();
  transport.onerror = (error) => errors.push(error.message);
  transport.onmessage = (message) => {
    messages.push(message);
    reply.resolve();
  };
  try {
    await transport.start();
    await transport.send({ jsonrpc: "2.0", id: 7, method: "ping" });
    await reply.promise;
    assert.deepEqual(messages, [{ jsonrpc: "2.0", id: 7, result: { ok: true } }]);
    assert.equal(errors.length, 4);
    assert.match(
      errors[0]!,
      /Upstream "noisy" wrote a malformed frame \(frame is not JSON: .*\); it was dropped: "this line is not json"/,
    );
    assert.match(
      errors[1]!,
      /frame of \d{4} bytes exceeds the limit of 4096 bytes.*\{\\"jsonrpc\\":\\"2.0\\",\\"method\\":\\"pad\\"/,
    );
    assert.match(errors[2]!, /frame is not valid UTF-8/);
    assert.match(
      errors[3]!,
      /Upstream "noisy" sent a message that is not JSON-RPC 2.0; it was dropped/,
    );
    assert.deepEqual(transport.stats, {
      invalidMessages: 1,
      malformedFrames: 3,
      suppressedStderrLines: 0,
    });
    assert.ok(
      entries.some((e) =>
        e.message === "upstream stderr" && e.fields.server === "noisy" &&
        e.fields.line === "noisy: got ping"
      ),
    );
  } finally {
    await transport.close();
  }
});

Deno.test({
  name: "A child that ignores stdin EOF and SIGTERM is killed within the grace period",
  ignore: !LINUX,
  async fn() {
    const { adapter: a, plan: p } = await plan(server({
      id: "stubborn",
      command: ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"],
    }));
    const { transport } = transportFor(a.workerUrl, p, "stubborn", { stopGraceMs: 300 });
    await transport.start();
    await transport.close();
    // The worker's own escalation ended it: had it not finished within the grace period, the
    // kernel would have terminated the worker before it could report the signal.
    assert.equal(transport.closeInfo?.signal, "SIGKILL");
    const pid = transport.pid!;
    await waitFor(() => processGroup(pid).length === 0, "no process left in the group", 2000);
  },
});

Deno.test("upstream-stdio warns that a permissions block is not enforced without sandbox deno", async () => {
  const { logger, entries } = recordingLogger();
  const a = await plugin.create(testPluginContext(logger));
  a.plan(server({ id: "loose", command: ["node", "s.js"], permissions: { read: ["/data"] } }), {
    maxMessageBytes: 1024,
    baseEnv: {},
  });
  assert.deepEqual(entries, [{
    level: "warn",
    message: "permissions are enforced only with sandbox: deno; this server runs unrestricted",
    fields: { server: "loose" },
  }]);
});
