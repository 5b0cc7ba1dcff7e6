/**
 * Test support: a real gateway on 127.0.0.1 (in process, real sockets) and SDK clients for it.
 * @module
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Clock } from "../../core/support/clock.ts";
import type { ResolveHost } from "../../core/support/private_address.ts";
import { resolveConfig } from "../../core/config/config.ts";
import { processEnvironment } from "../../core/config/environment.ts";
import { Kernel, type StartInfo } from "../../core/kernel.ts";
import { createLogger, type Logger } from "../../core/support/logger.ts";
import type { GatewayEvent } from "../../core/bus/events.ts";
import { writeFleet } from "./fleet.ts";

/** A started in-process gateway. */
export interface TestGateway {
  kernel: Kernel;
  info: StartInfo;
  url: string;
  /** MCP_SERVER_AUTH_TOKEN, with scope admin unless MCP_SERVER_AUTH_SCOPES says otherwise. */
  token: string;
  /** MCP_ADMIN_TOKEN: a second identity (`admin-token`), e.g. to approve what `token` asked for. */
  adminToken: string;
  logs: string[];
  stop(): Promise<void>;
}

/**
 * Starts a gateway on a free port with the given variables: unless set, a static token
 * "test-token" holding scope admin (one token for everything a test does) and an admin token
 * "test-admin-token", the other identity a test needs to approve what the first one asked for.
 */
export async function startGateway(
  env: Record<string, string> = {},
  options: {
    noAuth?: boolean;
    /** With `noAuth`: `--no-auth-admin` too (the anonymous caller may use the admin API). */
    noAuthAdmin?: boolean;
    pluginDirs?: string[];
    keepLog?: (line: string) => boolean;
    /** The kernel's clock (e.g. one running ahead, to make tokens expire without waiting). */
    clock?: Clock;
    /** How the egress guard looks names up (a test's own DNS server). */
    resolveHost?: ResolveHost;
    /** Variables the kernel reads itself (fleet interpolation, MCP_SYNC_*), over the process's. */
    kernelEnv?: Record<string, string>;
  } = {},
): Promise<TestGateway> {
  const logs: string[] = [];
  const keep = options.keepLog ?? (() => true);
  const logger: Logger = createLogger({
    level: "debug",
    sink: (line) => void (keep(line) && logs.push(line)),
  });
  const token = env.MCP_SERVER_AUTH_TOKEN ?? "test-token";
  const adminToken = env.MCP_ADMIN_TOKEN ?? "test-admin-token";
  const config = resolveConfig(
    {
      MCP_SERVER_PORT: "0",
      ...(options.noAuth ? {} : {
        MCP_SERVER_AUTH_TOKEN: token,
        MCP_SERVER_AUTH_SCOPES: "admin",
        MCP_ADMIN_TOKEN: adminToken,
      }),
      ...env,
    },
    options.noAuth ? { noAuth: true, ...(options.noAuthAdmin ? { noAuthAdmin: true } : {}) } : {},
  );
  const kernel = new Kernel({
    config,
    logger,
    ...(options.pluginDirs ? { pluginDirs: options.pluginDirs } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.resolveHost ? { resolveHost: options.resolveHost } : {}),
    ...(options.kernelEnv ? { env: { ...processEnvironment(), ...options.kernelEnv } } : {}),
  });
  const info = await kernel.start();
  return { kernel, info, url: info.url!, token, adminToken, logs, stop: () => kernel.stop() };
}

/**
 * A gateway serving the fleet document `yaml` (`proxy_servers: …`) once its fleet started, with an
 * SDK client connected over Streamable HTTP, for `fn`; `events` holds every bus event from the
 * gateway's start. The client, the gateway and the fleet file are gone after.
 */
export async function withFleet(
  yaml: string,
  fn: (gateway: TestGateway, client: Client, events: GatewayEvent[]) => Promise<void>,
): Promise<void> {
  const fleet = await writeFleet(yaml);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  const events: GatewayEvent[] = [];
  gateway.kernel.bus.subscribe((e) => events.push(e));
  try {
    await gateway.kernel.fleetStarted;
    const client = await connectHttp(gateway);
    try {
      await fn(gateway, client, events);
    } finally {
      await client.close();
    }
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
}

/** An SDK client connected over Streamable HTTP. */
export async function connectHttp(gateway: TestGateway, token = gateway.token): Promise<Client> {
  const client = new Client({ name: "e2e", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** An SDK client connected over legacy HTTP+SSE. */
export async function connectSse(gateway: TestGateway, token = gateway.token): Promise<Client> {
  const client = new Client({ name: "e2e-sse", version: "1.0.0" });
  await client.connect(
    new SSEClientTransport(new URL(`${gateway.url}/sse`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** Headers for a raw Streamable HTTP POST. */
export function mcpHeaders(
  token: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    Authorization: `Bearer ${token}`,
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    ...extra,
  };
}

/** An initialize request for a protocol version. */
export function initializeRequest(protocolVersion: string, id: number | string = 1) {
  return {
    jsonrpc: "2.0",
    id,
    method: "initialize",
    params: { protocolVersion, capabilities: {}, clientInfo: { name: "raw", version: "1" } },
  };
}

/** Opens a raw Streamable HTTP session (initialize) and returns the headers for its requests. */
export async function openSession(gateway: TestGateway): Promise<Record<string, string>> {
  const opened = await fetch(`${gateway.url}/mcp`, {
    method: "POST",
    headers: mcpHeaders(gateway.token),
    body: JSON.stringify(initializeRequest("2025-11-25")),
  });
  const session = opened.headers.get("mcp-session-id");
  await opened.body?.cancel();
  if (!session) throw new Error(`initialize answered ${opened.status} without a session id`);
  return mcpHeaders(gateway.token, {
    "Mcp-Session-Id": session,
    "Mcp-Protocol-Version": "2025-11-25",
  });
}
