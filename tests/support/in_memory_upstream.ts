/**
 * Test support: real SDK MCP servers in process, reached over linked in-memory transports, with a
 * switch that makes the link drop messages (an upstream that hangs).
 * @module
 */
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  type JSONRPCMessage,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { FleetServer } from "../../core/proxy/fleet_config.ts";

/** A fleet entry with test-friendly defaults. */
export function fleetServer(id: string, overrides: Partial<FleetServer> = {}): FleetServer {
  return {
    id,
    transport: "stdio",
    command: ["unused"],
    headers: {},
    env: {},
    enabled: true,
    timeouts: { connectMs: 5_000, callMs: 5_000 },
    health: { intervalMs: 30_000, degradedAfter: 1, failedAfter: 3 },
    breaker: { threshold: 5, baseMs: 30_000, maxMs: 600_000 },
    permissions: {},
    sandbox: "none",
    isolation: "worker",
    prefix: id,
    tools: { allow: [], deny: [] },
    line: 1,
    ...overrides,
  };
}

/** An in-process upstream: a real McpServer per connection, and a hang switch. */
export class InMemoryUpstream {
  /** Calls of each tool, by name. */
  readonly calls: string[] = [];
  /** While true, messages to the server are dropped (it appears hung). */
  hung = false;
  /** Servers created so far (one per connection). */
  readonly servers: McpServer[] = [];
  #tools: string[];

  constructor(tools: string[] = ["echo"]) {
    this.#tools = tools;
  }

  /** A new connection: returns the client-side transport. */
  connect(): Transport {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const server = this.#build();
    this.servers.push(server);
    const gate: Transport = {
      start: () => serverSide.start(),
      close: () => serverSide.close(),
      send: (message: JSONRPCMessage, options) => serverSide.send(message, options),
    };
    serverSide.onmessage = (message, extra) => {
      if (!this.hung) gate.onmessage?.(message, extra);
    };
    serverSide.onclose = () => gate.onclose?.();
    serverSide.onerror = (error) => gate.onerror?.(error);
    void server.connect(gate);
    return clientSide;
  }

  /** Closes the live connection, as if the upstream process exited. */
  async crash(): Promise<void> {
    await this.servers.at(-1)?.close();
  }

  /** Adds a tool on the live server (it sends tools/list_changed). */
  addTool(name: string): void {
    this.#tools.push(name);
    this.#register(this.servers.at(-1)!, name);
  }

  #build(): McpServer {
    const server = new McpServer({ name: "in-memory-upstream", version: "1.0.0" }, {
      capabilities: { logging: {} },
    });
    for (const name of this.#tools) this.#register(server, name);
    // Subscriptions are accepted (and kept nowhere): a test sends updates with sendResourceUpdated.
    server.server.registerCapabilities({ resources: { subscribe: true } });
    server.server.setRequestHandler(SubscribeRequestSchema, () => ({}));
    server.server.setRequestHandler(UnsubscribeRequestSchema, () => ({}));
    server.registerResource(
      "readme",
      "memo://readme",
      { description: "A readme", mimeType: "text/plain" },
      (uri) => Promise.resolve({ contents: [{ uri: uri.href, text: "hello from upstream" }] }),
    );
    server.registerPrompt(
      "greet",
      { description: "Greets", argsSchema: { who: z.string() } },
      ({ who }) =>
        Promise.resolve({
          messages: [{ role: "user", content: { type: "text", text: `Hello ${who}` } }],
        }),
    );
    return server;
  }

  #register(server: McpServer, name: string): void {
    server.registerTool(
      name,
      { description: `The ${name} tool`, inputSchema: { text: z.string().optional() } },
      ({ text }) => {
        this.calls.push(name);
        return Promise.resolve({ content: [{ type: "text", text: `${name}:${text ?? ""}` }] });
      },
    );
  }
}

/** Lets pending promise callbacks and zero-delay timers run. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}
