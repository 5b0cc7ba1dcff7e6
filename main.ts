/**
 * AGENT-33 MCP gateway command line: `serve | scan | sync | discover | policy`.
 *
 * Thin on purpose: parse flags, build the kernel, run it. Everything is printed to stderr, since
 * in stdio mode stdout carries the protocol.
 * @module
 */
import { parseArgs } from "node:util";
import { type ConfigFlags, loadEnvironment, resolveConfig } from "./core/config/config.ts";
import { GatewayError } from "./core/support/errors.ts";
import { Kernel, type StartInfo } from "./core/kernel.ts";
import { type CommandIo, processIo } from "./cli/command.ts";
import { POLICY_HELP, runPolicyCommand } from "./cli/policy_cli.ts";
import { runScanCommand, SCAN_HELP } from "./cli/scan_cli.ts";
import { runSyncCommand, SYNC_HELP } from "./cli/sync_cli.ts";
import { DISCOVER_HELP, runDiscoverCommand } from "./cli/discover_cli.ts";
import { stderrSink } from "./core/support/logger.ts";

const say = (text = "") => stderrSink(text);

const HELP: Record<string, string> = {
  main: `AGENT-33 MCP gateway

Usage: deno task start            (HTTP, embedded defaults)
       deno task mcp              (stdio, for desktop clients)
       main.ts <command> [options]

Commands:
  serve      Serve MCP over stdio or HTTP (Streamable HTTP at /mcp, legacy SSE at /sse)
  scan       Scan MCP server descriptors for poisoned or risky tools
  sync       Sync the fleet with an MCP registry
  discover   Discover MCP servers on the LAN, a tailnet or Kubernetes
  policy     Check, explain and test governance policies

Run "main.ts <command> --help" for a command's options.
Configuration comes from the environment and .env; see docs/configuration.md.`,
  serve: `Usage: main.ts serve [options]

Options:
  --transport stdio|http   Inbound transport (MCP_SERVER_TRANSPORT, default http; "sse" = http)
  --host H                 HTTP bind address (MCP_SERVER_HOST, default 127.0.0.1)
  --port P                 HTTP port (MCP_SERVER_PORT, default 8787; 0 picks a free port)
  --config FILE            Fleet YAML of upstream servers (MCP_PROXY_CONFIG_PATH)
  --env-file FILE          Read variables from FILE instead of ./.env
  --no-auth                No credentials on HTTP (loopback only; for development and conformance):
                           the caller may use the MCP endpoints, not the admin API nor approvals
  --no-auth-admin          With --no-auth: the anonymous caller may also use the admin API and
                           decide approvals (any local process can then add servers, i.e. run commands)
  --demo                   Embedded defaults for what is not configured: the demo fleet
                           (demo/fleet.yaml), agents/, skills/, workflows/, knowledge/, and
                           the audit log and approvals in MCP_DATA_DIR (./.agent33)
  -h, --help               Show this help`,
  scan: SCAN_HELP,
  sync: SYNC_HELP,
  discover: DISCOVER_HELP,
  policy: POLICY_HELP,
};

async function main(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  if (command === undefined || command === "-h" || command === "--help" || command === "help") {
    say(HELP.main);
    return command === undefined ? 2 : 0;
  }
  if (!(command in HELP) || command === "main") {
    say(`Unknown command "${command}".\n\n${HELP.main}`);
    return 2;
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    say(HELP[command]);
    return 0;
  }
  const tool = TOOLS[command];
  if (tool) return await tool.run(rest, processIo({ lines: tool.lines }));
  if (command !== "serve") {
    say(`"${command}" is not available yet.\n\n${HELP[command]}`);
    return 3;
  }
  return await serve(rest);
}

/** The commands besides `serve`: results on stdout (nothing speaks MCP there), problems on stderr. */
const TOOLS: Record<string, {
  run(args: string[], io: CommandIo): Promise<number>;
  /** Its results are lines (`policy`), not text that ends its own lines. */
  lines?: boolean;
}> = {
  policy: { run: runPolicyCommand, lines: true },
  scan: { run: runScanCommand },
  sync: { run: runSyncCommand },
  discover: { run: runDiscoverCommand },
};

async function serve(args: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        transport: { type: "string" },
        host: { type: "string" },
        port: { type: "string" },
        config: { type: "string" },
        "env-file": { type: "string" },
        "no-auth": { type: "boolean" },
        "no-auth-admin": { type: "boolean" },
        demo: { type: "boolean" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    say(`${(error as Error).message}\n\n${HELP.serve}`);
    return 2;
  }
  const flags: ConfigFlags = {};
  if (values.transport !== undefined) flags.transport = values.transport;
  if (values.host !== undefined) flags.host = values.host;
  if (values.port !== undefined) flags.port = values.port;
  if (values.config !== undefined) flags.config = values.config;
  if (values["no-auth"]) flags.noAuth = true;
  if (values["no-auth-admin"]) flags.noAuthAdmin = true;
  if (values.demo) flags.demo = true;

  // First signal: drain calls in flight (MCP_SHUTDOWN_GRACE_MS). Second: cut them off and close.
  // Third: exit on the spot, for a stop that is itself stuck. Listening before the start: a signal
  // landing while the kernel starts would otherwise kill the process and orphan its upstreams.
  let kernel: Kernel | undefined;
  let started = false;
  let received = 0;
  const onSignal = () => {
    received++;
    if (!started) {
      // Acted on once started; a second signal still ends a start that hangs.
      if (received >= 2) Deno.exit(130);
      return;
    }
    if (received === 1) {
      void kernel!.stop();
    } else if (received === 2) {
      kernel!.logger.warn("second signal: cutting off calls in flight and stopping at once");
      void kernel!.stop({ immediate: true });
    } else {
      kernel!.logger.error("third signal: exiting without cleanup; upstream processes may be left");
      Deno.exit(130);
    }
  };
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
  for (const signal of signals) Deno.addSignalListener(signal, onSignal);
  try {
    try {
      // One resolved environment: the config and the fleet's `${VAR}` both see `.env`.
      const env = await loadEnvironment(
        values["env-file"] === undefined ? {} : { envFile: values["env-file"] },
      );
      kernel = new Kernel({ config: resolveConfig(env, flags), env });
      const info = await kernel.start();
      if (info.transport === "http") printWhereToConnect(info);
    } catch (error) {
      if (error instanceof GatewayError) {
        say(`Cannot start: ${error.message}`);
        return 1;
      }
      // Anything else is unexpected (a bug, or a backend failing in a way not yet named): say so
      // in one line a person can act on, with the stack after it for the report.
      say(`Cannot start: ${error instanceof Error ? error.message : String(error)}`);
      if (error instanceof Error && error.stack) say(error.stack);
      return 1;
    }
    started = true;
    if (received > 0) void kernel.stop(received > 1 ? { immediate: true } : {});
    await kernel.done;
    return 0;
  } finally {
    for (const signal of signals) Deno.removeSignalListener(signal, onSignal);
  }
}

function printWhereToConnect(info: StartInfo): void {
  const token = info.generatedToken;
  say();
  say(`AGENT-33 MCP gateway is listening on ${info.url}`);
  say(`  Streamable HTTP: ${info.url}/mcp`);
  say(`  Legacy SSE:      ${info.url}/sse`);
  say(`  Health:          ${info.url}/healthz  ${info.url}/readyz`);
  say(`  Fleet status:    ${info.url}/v1/operator/status (operator token)`);
  if (info.oauth) {
    say();
    say(`OAuth: clients get access tokens from ${info.oauth.issuer}`);
    say(`  for the resource ${info.oauth.resource}; the gateway advertises this at`);
    say(`  ${info.oauth.metadataUrl}`);
  }
  if (info.fleet) {
    say();
    say(`Upstreams from ${info.fleet.path}: ${info.fleet.servers.join(", ") || "none enabled"}`);
    say(`  (starting in the background; their tools appear as <server_id>__<tool>)`);
  }
  if (token) {
    say();
    say(`No token was configured, so a client token (scope mcp) was generated for this run.`);
    say(`Give it to MCP clients (/mcp, /sse):`);
    say(`  Authorization: Bearer ${token}`);
    say(`Set MCP_SERVER_AUTH_TOKEN to keep a client token across restarts.`);
  }
  if (info.generatedAdminToken) {
    say();
    say(`Operator token (scope admin), printed only now: for the admin API (/v1/…), the`);
    say(`dashboard (${info.url}/dashboard) and deciding approvals. Do not give it to clients:`);
    say(`  Authorization: Bearer ${info.generatedAdminToken}`);
    say(`Set MCP_ADMIN_TOKEN (or use MCP_AUTH_TOKENS_FILE) to keep one across restarts.`);
  }
  say();
  say(`Try it:`);
  say(
    `  curl -s ${info.url}/mcp -H 'Authorization: Bearer ${token ?? "<token>"}' ` +
      `-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' ` +
      `-d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'`,
  );
  say();
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
