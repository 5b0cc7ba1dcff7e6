/**
 * Reads live servers into descriptors: connects with the SDK client (stdio child, URL, or each
 * enabled upstream of a fleet file through the gateway's sandboxed upstream workers), lists
 * tools, prompts, resources and templates (every page), and disconnects.
 * @module
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { systemClock } from "../support/clock.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import { silentLogger } from "../support/logger.ts";
import type { PluginContext } from "../plugin_api/mod.ts";
import { BUILTIN_PLUGIN_DIR, loadPlugins } from "../plugin_host/plugin_loader.ts";
import { loadFleetConfig } from "../proxy/fleet_config.ts";
import { syncAllowsPrivate } from "../proxy/fleet_origin.ts";
import { baseEnv, UpstreamTransports } from "../proxy/upstream_transports.ts";
import { withTimeout } from "../proxy/with_timeout.ts";
import { StreamTransport } from "../mcp/stream_transport.ts";
import type { ServerDescriptor } from "./descriptor.ts";

/** A server that could not be read; the scan is then incomplete. */
export interface CollectFailure {
  server: string;
  error: string;
}

/** What collection produced. */
export interface Collected {
  descriptors: ServerDescriptor[];
  failures: CollectFailure[];
}

const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
const CLIENT_INFO = { name: "agent33-scan", version: "1.0.0" };

/** Lists everything a connected server shows a model. */
export async function describe(client: Client, id: string): Promise<ServerDescriptor> {
  const caps = client.getServerCapabilities() ?? {};
  const descriptor: ServerDescriptor = { id, tools: [] };
  const info = client.getServerVersion();
  if (info) descriptor.serverInfo = { ...info };
  const instructions = client.getInstructions();
  if (instructions) descriptor.instructions = instructions;
  if (caps.tools) {
    descriptor.tools = await pages((cursor) => client.listTools({ cursor }), "tools");
  }
  if (caps.prompts) {
    descriptor.prompts = await pages((cursor) => client.listPrompts({ cursor }), "prompts");
  }
  if (caps.resources) {
    descriptor.resources = await pages((cursor) => client.listResources({ cursor }), "resources");
    descriptor.resourceTemplates = await pages(
      (cursor) => client.listResourceTemplates({ cursor }),
      "resourceTemplates",
    );
  }
  return descriptor;
}

async function pages<K extends string>(
  list: (cursor?: string) => Promise<Record<K, unknown[]> & { nextCursor?: string }>,
  key: K,
): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let cursor: string | undefined;
  // A bound, so a server that hands out cursors forever cannot hang the scan.
  for (let page = 0; page < 1000; page++) {
    const result = await list(cursor);
    items.push(...(result[key] as Record<string, unknown>[]));
    cursor = result.nextCursor;
    if (!cursor) break;
  }
  return items;
}

async function describeOver(
  transport: Transport,
  id: string,
  timeoutMs: number,
): Promise<ServerDescriptor> {
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  try {
    return await withTimeout(
      (async () => {
        await client.connect(transport);
        return await describe(client, id);
      })(),
      timeoutMs,
      systemClock,
      `server "${id}" did not answer within ${timeoutMs} ms`,
    );
  } finally {
    await client.close().catch(() => {});
  }
}

/** Splits a command line into argv: whitespace-separated, with '…' and "…" quoting. */
export function splitCommand(command: string): string[] {
  const argv: string[] = [];
  for (const m of command.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g)) {
    argv.push(m[1]?.replace(/\\(.)/g, "$1") ?? m[2] ?? m[3]!);
  }
  return argv;
}

/** Spawns a stdio server, reads its descriptor, and stops it. */
export async function collectStdio(
  argv: string[],
  id: string,
  timeoutMs: number,
): Promise<ServerDescriptor> {
  const [command, ...args] = argv;
  if (!command) throw new Error("empty --stdio command");
  const child = new Deno.Command(command, {
    args,
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const transport = new StreamTransport(child.stdout, child.stdin, {
    maxMessageBytes: MAX_MESSAGE_BYTES,
    answerMalformed: false,
  });
  try {
    return await describeOver(transport, id, timeoutMs);
  } finally {
    // Closing stdin ends a well-behaved server; a kill covers the rest.
    await transport.close();
    try {
      child.kill("SIGTERM");
    } catch { /* already exited */ }
    await child.status;
  }
}

/** Reads a server over Streamable HTTP, falling back to legacy SSE. */
export async function collectUrl(
  url: string,
  id: string,
  timeoutMs: number,
  headers: Record<string, string> = {},
): Promise<ServerDescriptor> {
  const target = new URL(url);
  try {
    return await describeOver(
      new StreamableHTTPClientTransport(target, { requestInit: { headers } }),
      id,
      timeoutMs,
    );
  } catch (error) {
    try {
      return await describeOver(
        new SSEClientTransport(target, { requestInit: { headers } }),
        id,
        timeoutMs,
      );
    } catch {
      throw error;
    }
  }
}

/** Reads every enabled upstream of a fleet file through the gateway's upstream plugins. */
export async function collectFleet(
  path: string,
  env: Record<string, string | undefined>,
): Promise<Collected> {
  const fleet = await loadFleetConfig(path, env, {
    separator: env.MCP_PROXY_TOOL_SEPARATOR ?? "__",
    healthIntervalSeconds: 30,
  });
  const upstreams = new UpstreamTransports({
    maxMessageBytes: MAX_MESSAGE_BYTES,
    baseEnv: baseEnv(env),
    logger: silentLogger,
    ...(syncAllowsPrivate(env) ? { allowPrivate: true } : {}),
  });
  const ctx: PluginContext = {
    logger: silentLogger,
    clock: systemClock,
    env,
    config: {},
    bus: new InProcessEventBus(silentLogger),
    tools: { register: () => () => {} },
  };
  const { plugins } = await loadPlugins([BUILTIN_PLUGIN_DIR]);
  for (const { manifest } of plugins) {
    if (manifest.kind === "upstream") upstreams.add(await manifest.create(ctx));
  }
  const result: Collected = { descriptors: [], failures: [] };
  try {
    await Promise.all(
      fleet.servers.filter((s) => s.enabled).map(async (server) => {
        try {
          const transport = upstreams.create(server);
          result.descriptors.push(
            await describeOver(transport, server.id, server.timeouts.connectMs),
          );
        } catch (error) {
          result.failures.push({ server: server.id, error: message(error) });
        }
      }),
    );
  } finally {
    // The egress guard, if a registry's entry needed it.
    await upstreams.close();
  }
  result.descriptors.sort((a, b) => a.id.localeCompare(b.id));
  return result;
}

/** An error's message. */
export function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
