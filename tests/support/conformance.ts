/**
 * Helpers for the official MCP conformance suite (`npm:@modelcontextprotocol/conformance`):
 * `runConformance` runs its server scenarios against a URL and reports per-scenario results;
 * `serveOverHttp` serves any MCP server factory over Streamable HTTP on loopback (one fresh
 * server per session, DNS-rebinding protection on) so a fixture can be checked directly.
 * @module
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";

/** The conformance CLI this project pins. */
export const CONFORMANCE_PACKAGE = "npm:@modelcontextprotocol/conformance@0.1.16";

/** One scenario's check counts (checks with status SUCCESS / FAILURE / WARNING). */
export interface ScenarioResult {
  scenario: string;
  passed: number;
  failed: number;
  warnings: number;
}

/** The outcome of one conformance run. */
export interface ConformanceRun {
  /** Per scenario, in the order the suite ran them. */
  results: ScenarioResult[];
  /** Sums over `results`. */
  passed: number;
  failed: number;
  /** The CLI's exit code (0 when no check failed). */
  code: number;
  /** The CLI's stdout followed by its stderr. */
  text: string;
}

/** Options for {@link runConformance}. */
export interface ConformanceOptions {
  /** Run one scenario. */
  scenario?: string;
  /** Run a suite: "active" (the CLI's default) or "all" (active plus pending). */
  suite?: "all" | "active";
  /** Kill the CLI after this long (default 5 minutes). */
  timeoutMs?: number;
}

/**
 * Runs the conformance CLI's server scenarios against `url` and parses the results. Counts come
 * from the per-scenario `checks.json` the CLI writes (`-o`), falling back to its printed
 * summary for a scenario that crashed before writing one.
 */
export async function runConformance(
  url: string,
  options: ConformanceOptions = {},
): Promise<ConformanceRun> {
  const outputDir = await Deno.makeTempDir({ prefix: "conformance-" });
  try {
    const args = ["run", "-A", CONFORMANCE_PACKAGE, "server", "--url", url, "-o", outputDir];
    if (options.scenario) args.push("--scenario", options.scenario);
    else if (options.suite) args.push("--suite", options.suite);
    const output = await new Deno.Command(Deno.execPath(), {
      args,
      env: { NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(options.timeoutMs ?? 300_000),
    }).output();
    const decoder = new TextDecoder();
    const text = decoder.decode(output.stdout) + decoder.decode(output.stderr);
    const results = mergeResults(
      ranScenarios(text, options.scenario),
      await readChecks(outputDir),
      printedResults(text, options.scenario),
    );
    return {
      results,
      passed: results.reduce((sum, r) => sum + r.passed, 0),
      failed: results.reduce((sum, r) => sum + r.failed, 0),
      code: output.code,
      text,
    };
  } finally {
    await Deno.remove(outputDir, { recursive: true }).catch(() => {});
  }
}

/** Scenario names in run order: "=== Running scenario: X ===" (suite) or the one requested. */
function ranScenarios(text: string, scenario?: string): string[] {
  if (scenario) return [scenario];
  return [...text.matchAll(/^=== Running scenario: (\S+) ===$/gm)].map((m) => m[1]!);
}

/** Counts from `<dir>/server-<scenario>-<ISO timestamp>/checks.json`. */
async function readChecks(dir: string): Promise<Map<string, ScenarioResult>> {
  const found = new Map<string, ScenarioResult>();
  for await (const entry of Deno.readDir(dir)) {
    const match = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(entry.name);
    if (!entry.isDirectory || !match) continue;
    let checks: { status?: string }[];
    try {
      checks = JSON.parse(await Deno.readTextFile(`${dir}/${entry.name}/checks.json`));
    } catch {
      continue; // the scenario threw before its checks were written
    }
    const count = (status: string) => checks.filter((c) => c.status === status).length;
    found.set(match[1]!, {
      scenario: match[1]!,
      passed: count("SUCCESS"),
      failed: count("FAILURE"),
      warnings: count("WARNING"),
    });
  }
  return found;
}

/** Counts the CLI printed: the suite summary ("✓ X: 3 passed, 0 failed") or "Passed: a/b, …". */
function printedResults(text: string, scenario?: string): Map<string, ScenarioResult> {
  const found = new Map<string, ScenarioResult>();
  for (const m of text.matchAll(/^[✓✗] (\S+): (\d+) passed, (\d+) failed$/gm)) {
    found.set(m[1]!, { scenario: m[1]!, passed: +m[2]!, failed: +m[3]!, warnings: 0 });
  }
  const single = /^Passed: (\d+)\/\d+, (\d+) failed, (\d+) warnings$/m.exec(text);
  if (scenario && single) {
    found.set(scenario, {
      scenario,
      passed: +single[1]!,
      failed: +single[2]!,
      warnings: +single[3]!,
    });
  }
  return found;
}

function mergeResults(
  order: string[],
  fromChecks: Map<string, ScenarioResult>,
  printed: Map<string, ScenarioResult>,
): ScenarioResult[] {
  const names = [...new Set([...order, ...printed.keys(), ...fromChecks.keys()])];
  // A scenario that ran but left no counts at all (the CLI died) counts as one failure.
  return names.map((scenario) =>
    fromChecks.get(scenario) ?? printed.get(scenario) ??
      { scenario, passed: 0, failed: 1, warnings: 0 }
  );
}

/** An MCP server that can be connected to one transport (`McpServer` or low-level `Server`). */
export interface ConnectableServer {
  connect(transport: Transport): Promise<void>;
  close(): Promise<void>;
}

/** A running {@link serveOverHttp} endpoint. */
export interface HttpEndpoint {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** Number of live sessions. */
  readonly sessions: number;
  /** Closes every session and stops listening. */
  close(): Promise<void>;
}

interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  server: ConnectableServer;
}

/**
 * Serves `createServer()` over Streamable HTTP at `http://127.0.0.1:<port>/mcp`: each
 * `initialize` without a session id gets a fresh server and transport; later requests are
 * routed by `Mcp-Session-Id`. The SDK transport's DNS-rebinding protection admits only
 * `localhost`, `127.0.0.1` and `[::1]` with this port as Host (and Origin, when sent).
 */
export async function serveOverHttp(
  createServer: () => ConnectableServer,
): Promise<HttpEndpoint> {
  const sessions = new Map<string, Session>();
  const pending = new Set<Session>();
  let allowedHosts: string[] = [];
  let allowedOrigins: string[] = [];

  const handle = async (req: Request): Promise<Response> => {
    if (new URL(req.url).pathname !== "/mcp") return new Response("Not Found", { status: 404 });
    const sessionId = req.headers.get("mcp-session-id");
    if (sessionId) {
      const session = sessions.get(sessionId);
      if (!session) return jsonRpcError(404, -32001, "Session not found");
      return await session.transport.handleRequest(req);
    }
    if (req.method !== "POST") {
      return jsonRpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required");
    }
    let body: unknown;
    try {
      body = await req.json();
    } catch {
      return jsonRpcError(400, -32700, "Parse error: request body is not JSON");
    }
    if (!isInitialize(body)) {
      return jsonRpcError(400, -32000, "Bad Request: no session; send initialize first");
    }
    const server = createServer();
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      enableDnsRebindingProtection: true,
      allowedHosts,
      allowedOrigins,
      onsessioninitialized: (id) => {
        sessions.set(id, session);
      },
      onsessionclosed: (id) => {
        sessions.delete(id);
      },
    });
    const session: Session = { transport, server };
    pending.add(session);
    try {
      await server.connect(transport);
      return await transport.handleRequest(req, { parsedBody: body });
    } finally {
      pending.delete(session);
      // Rejected (bad Host/Origin, bad initialize): no session was created; drop the server.
      if (!transport.sessionId || !sessions.has(transport.sessionId)) await server.close();
    }
  };

  const { promise: listening, resolve: onListen } = Promise.withResolvers<Deno.NetAddr>();
  const httpServer = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: onListen },
    async (req) => {
      try {
        return await handle(req);
      } catch (error) {
        return jsonRpcError(500, -32603, `Internal error: ${(error as Error).message}`);
      }
    },
  );
  const { port } = await listening;
  allowedHosts = ["127.0.0.1", "localhost", "[::1]"].map((host) => `${host}:${port}`);
  allowedOrigins = allowedHosts.map((host) => `http://${host}`);

  return {
    url: `http://127.0.0.1:${port}/mcp`,
    get sessions() {
      return sessions.size;
    },
    async close() {
      const open = [...sessions.values(), ...pending];
      sessions.clear();
      await Promise.allSettled(open.map((s) => s.server.close()));
      await httpServer.shutdown();
    },
  };
}

function isInitialize(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some((m) =>
    typeof m === "object" && m !== null && (m as { method?: unknown }).method === "initialize"
  );
}

function jsonRpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: "2.0", id: null, error: { code, message } }, { status });
}
