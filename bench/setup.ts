/**
 * Bench support: the upstream under test, fleet files, gateway child processes and SDK clients.
 *
 * The direct baseline runs the exact argv and environment the gateway's stdio adapter plans for
 * the same fleet entry (`planStdio`), so both sides talk to the same server under the same sandbox.
 * @module
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { UpstreamServerSpec } from "../core/plugin_api/mod.ts";
import { baseEnv } from "../core/proxy/upstream_transports.ts";
import { StreamTransport } from "../core/mcp/stream_transport.ts";
import { planStdio } from "../plugins/upstream-stdio/command_plan.ts";
import {
  EVERYTHING_LISTENING,
  everythingArgs,
  SERVER_EVERYTHING,
} from "../tests/fixtures/upstreams/reference_server.ts";
import { bounded, type Child, cleanEnv, ROOT, spawnChild } from "./processes.ts";

/** The checkout whose `main.ts` (and fixture upstream) is benchmarked: this one unless changed. */
let gatewayRoot = ROOT;

/** Benchmarks the gateway of another checkout (e.g. an older commit, exported with `git archive`). */
export function useGatewayRoot(dir: string): void {
  gatewayRoot = dir.endsWith("/") ? dir : `${dir}/`;
}

/** Extra `deno run` flags for every gateway the bench starts (the profiler's `--inspect`). */
let gatewayFlags: string[] = [];

/** A command every gateway the bench starts runs under (the profiler's `valgrind …`). */
let gatewayWrapper: string[] = [];

/** Runs every gateway started from now on under `argv` (a program and its flags), or directly. */
export function useGatewayWrapper(argv: string[]): void {
  gatewayWrapper = [...argv];
}

/** The program and arguments of a gateway `main.ts serve` with `extra` after them. */
function gatewayCommand(extra: string[]): [string, string[]] {
  const argv = [...gatewayWrapper, Deno.execPath(), ...gatewayArgs(), ...extra];
  return [argv[0]!, argv.slice(1)];
}

/** Starts every later gateway with `flags` added to its `deno run` (before the script). */
export function useGatewayFlags(flags: string[]): void {
  gatewayFlags = [...flags];
}

/** The checkout being benchmarked (ends with "/"). */
export function getGatewayRoot(): string {
  return gatewayRoot;
}

/** The pinned reference server every latency scenario calls. */
export const EVERYTHING_PACKAGE = `npm:${SERVER_EVERYTHING}`;

/** Frame limit for the bench's own stdio clients (the gateway default). */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/** The fleet entry of the everything server (as in demo/fleet.yaml). */
export const EVERYTHING: UpstreamServerSpec = {
  id: "everything",
  transport: "stdio",
  command: ["deno", "run", EVERYTHING_PACKAGE, "stdio"],
  headers: {},
  env: {},
  sandbox: "deno",
  permissions: {
    env: ["GZIP_MAX_FETCH_SIZE", "GZIP_MAX_FETCH_TIME_MILLIS", "GZIP_ALLOWED_DOMAINS"],
  },
};

/** A light fixture upstream for the memory scenario: tests/fixtures/upstreams/fault_server.ts. */
export function faultServer(id: string): UpstreamServerSpec {
  return {
    id,
    transport: "stdio",
    command: [
      "deno",
      "run",
      "--config",
      `${gatewayRoot}deno.json`,
      `${gatewayRoot}tests/fixtures/upstreams/fault_server.ts`,
    ],
    headers: {},
    env: { FAULT: "none" },
    sandbox: "deno",
    permissions: { env: ["FAULT"], read: true },
  };
}

/** The argv and environment the gateway would spawn for `spec` (given the bench's child env). */
export function directPlan(
  spec: UpstreamServerSpec,
): { argv: string[]; env: Record<string, string> } {
  const plan = planStdio(spec, {
    maxMessageBytes: MAX_MESSAGE_BYTES,
    baseEnv: baseEnv(cleanEnv()),
  });
  return { argv: plan.start.command!, env: plan.start.env ?? {} };
}

/** A temp fleet file (JSON is YAML) listing `servers` (each with `extra` fields); remove the dir when done. */
export async function writeFleet(
  servers: UpstreamServerSpec[],
  extra: Record<string, unknown> = {},
): Promise<{ path: string; remove(): Promise<void> }> {
  const dir = await Deno.makeTempDir({ prefix: "agent33-bench-" });
  const path = `${dir}/fleet.yaml`;
  const entries = servers.map((s) => ({
    id: s.id,
    transport: s.transport,
    command: s.command,
    ...(Object.keys(s.env).length ? { env: s.env } : {}),
    sandbox: s.sandbox,
    permissions: s.permissions,
    ...extra,
  }));
  await Deno.writeTextFile(path, JSON.stringify({ proxy_servers: entries }, null, 2) + "\n");
  return { path, remove: () => Deno.remove(dir, { recursive: true }).catch(() => {}) };
}

/** The upstream itself, spawned by the bench, speaking MCP on its stdin/stdout. */
export function spawnDirect(spec: UpstreamServerSpec): Child {
  const { argv, env } = directPlan(spec);
  return spawnChild(`direct ${spec.id}`, argv[0]!, argv.slice(1), {
    env,
    stdin: "piped",
    stdout: "piped",
    gracefully: "close-stdin",
    graceMs: 3_000,
  });
}

/** As `deno task start` runs it (the V8 flag caps the young generation: see docs/performance.md). */
const gatewayArgs = () => [
  "run",
  "-A",
  "--v8-flags=--max-semi-space-size=2",
  ...gatewayFlags,
  `${gatewayRoot}main.ts`,
  "serve",
];

/** `main.ts serve --transport stdio` with the fleet file. */
export function spawnStdioGateway(fleetPath: string, env: Record<string, string> = {}): Child {
  return spawnChild(
    "gateway (stdio)",
    ...gatewayCommand(["--transport", "stdio"]),
    {
      env: cleanEnv({ MCP_PROXY_CONFIG_PATH: fleetPath, ...env }),
      cwd: gatewayRoot,
      stdin: "piped",
      stdout: "piped",
      gracefully: "close-stdin",
    },
  );
}

/** A gateway serving HTTP on a free loopback port, and its base URL. */
export interface HttpGateway {
  child: Child;
  url: string;
}

/**
 * `main.ts serve --transport http --port 0 --no-auth --no-auth-admin` (the readiness poll reads
 * the operator status); resolves once it prints its URL.
 */
export async function startHttpGateway(
  name: string,
  fleetPath: string | undefined,
  env: Record<string, string> = {},
): Promise<HttpGateway> {
  const child = spawnChild(
    name,
    ...gatewayCommand([
      "--transport",
      "http",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--no-auth",
      "--no-auth-admin",
    ]),
    {
      env: cleanEnv({ ...(fleetPath ? { MCP_PROXY_CONFIG_PATH: fleetPath } : {}), ...env }),
      cwd: gatewayRoot,
      stdin: "null",
      stdout: "null",
      gracefully: "sigterm",
    },
  );
  const match = await child.waitForStderr(/listening on (http:\/\/\S+)/, 60_000);
  return { child, url: match[1]! };
}

/**
 * The upstream itself in its own Streamable HTTP mode on a free port (the "direct over HTTP"
 * baseline); its URL is the server root, as for a gateway.
 */
export async function startEverythingHttp(): Promise<HttpGateway> {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const child = spawnChild(
    "upstream (Streamable HTTP)",
    Deno.execPath(),
    everythingArgs("streamableHttp"),
    { env: cleanEnv({ PORT: String(port) }), stdin: "null", stdout: "null", gracefully: "sigterm" },
  );
  await child.waitForStderr(EVERYTHING_LISTENING, 60_000);
  return { child, url: `http://127.0.0.1:${port}` };
}

/** One upstream in the operator status. */
interface ServerStatus {
  id: string;
  state: string;
  lastError?: string;
}

/** Polls `/v1/operator/status` until the fleet has started and every upstream is READY. */
export async function waitFleetReady(gateway: HttpGateway, expected: number, ms: number) {
  const deadline = Date.now() + ms;
  let last = "no answer yet";
  for (;;) {
    try {
      const response = await fetch(`${gateway.url}/v1/operator/status`);
      const body = await response.json() as { ready: boolean; servers: ServerStatus[] };
      const failed = body.servers.filter((s) => s.state === "FAILED");
      if (failed.length) {
        throw new FleetFailed(
          `${gateway.child.name}: upstream(s) FAILED: ` +
            failed.map((s) => `${s.id}: ${s.lastError ?? "?"}`).join("; "),
        );
      }
      const ready = body.servers.filter((s) => s.state === "READY").length;
      last = `ready=${body.ready}, ${ready}/${body.servers.length} READY`;
      if (body.ready && ready === expected && body.servers.length === expected) return;
    } catch (error) {
      if (error instanceof FleetFailed) throw error;
      last = String(error);
    }
    if (gateway.child.exited) {
      throw new Error(`${gateway.child.name} exited; stderr:\n${gateway.child.stderrTail()}`);
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${gateway.child.name}: fleet not READY within ${ms} ms (${last}); stderr:\n` +
          gateway.child.stderrTail(),
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

class FleetFailed extends Error {}

/** An SDK client over a child's stdin/stdout. */
export async function connectStdio(child: Child): Promise<Client> {
  const client = new Client({ name: "agent33-bench", version: "1.0.0" });
  const transport = new StreamTransport(child.process.stdout, child.process.stdin, {
    maxMessageBytes: MAX_MESSAGE_BYTES,
    answerMalformed: false,
  });
  await bounded(client.connect(transport), 60_000, `initialize ${child.name}`);
  return client;
}

/** An SDK client over Streamable HTTP (`/mcp`). */
export async function connectStreamableHttp(gateway: HttpGateway): Promise<Client> {
  const client = new Client({ name: "agent33-bench", version: "1.0.0" });
  await bounded(
    client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`))),
    30_000,
    `initialize ${gateway.child.name} /mcp`,
  );
  return client;
}

/** An SDK client over legacy HTTP+SSE (`/sse` + `/messages`). */
export async function connectLegacySse(gateway: HttpGateway): Promise<Client> {
  const client = new Client({ name: "agent33-bench", version: "1.0.0" });
  await bounded(
    client.connect(new SSEClientTransport(new URL(`${gateway.url}/sse`))),
    30_000,
    `initialize ${gateway.child.name} /sse`,
  );
  return client;
}

/** Polls tools/list until `tool` is listed (the stdio gateway has no status endpoint). */
export async function waitForTool(client: Client, tool: string, what: string, ms: number) {
  const deadline = Date.now() + ms;
  for (;;) {
    const { tools } = await bounded(client.listTools(), 10_000, `tools/list on ${what}`);
    if (tools.some((t) => t.name === tool)) return;
    if (Date.now() > deadline) {
      throw new Error(
        `${what}: tool ${tool} not listed within ${ms} ms; listed: ${
          tools.map((t) => t.name).join(", ")
        }`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Per-call limit: a stuck call fails the run instead of hanging it. */
const CALL_TIMEOUT_MS = 10_000;

/** A `tools/call` of echo with `{ message: "hi" }` that rejects unless the echo came back. */
export function echoCall(client: Client, tool: string): () => Promise<void> {
  return async () => {
    const result = await client.callTool(
      { name: tool, arguments: { message: "hi" } },
      undefined,
      { timeout: CALL_TIMEOUT_MS },
    );
    const content = result.content as { type: string; text?: string }[] | undefined;
    if (result.isError || !content?.[0]?.text?.includes("hi")) {
      throw new Error(`${tool} answered unexpectedly: ${JSON.stringify(result).slice(0, 300)}`);
    }
  };
}

/** Closes a client within a bound, ignoring errors (the process is stopped next anyway). */
export async function closeClient(client: Client | undefined): Promise<void> {
  if (!client) return;
  try {
    await bounded(client.close(), 5_000, "client close");
  } catch { /* the process is stopped next */ }
}
