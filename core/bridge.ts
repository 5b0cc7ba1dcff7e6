/**
 * MCPServiceBridge: the wiring layer between MCP sessions and the engine's services.
 *
 * Each inbound session gets its own low-level SDK `Server` (the tool list is dynamic, so the
 * high-level `McpServer` does not fit); its handlers resolve to the registries held here. The
 * caller was authenticated by the transport before `serve` is called.
 * @module
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  CompleteRequestSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  type Prompt,
  ReadResourceRequestSchema,
  type Resource,
  type ResourceTemplate,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { Clock } from "./clock.ts";
import type { Definition, DefinitionRegistry } from "./definition_registry.ts";
import { GatewayError, toMcpError } from "./errors.ts";
import type { EventBus } from "./event_bus.ts";
import type { Logger } from "./logger.ts";
import { paginate } from "./pagination.ts";
import type { ServedSession, SessionInfo, ToolCallContext } from "./plugin_api.ts";
import type { ToolRegistry } from "./tool_registry.ts";
import { GATEWAY_INFO } from "./version.ts";

/** URI of the system status resource. */
export const STATUS_URI = "agent33://system/status";

/** The definition kinds exposed as resources, with their URI path segment. */
const DEFINITION_KINDS = [
  { kind: "agents", noun: "Agent" },
  { kind: "workflows", noun: "Workflow" },
  { kind: "skills", noun: "Skill" },
] as const;
type DefinitionKind = typeof DEFINITION_KINDS[number]["kind"];

/** Counts served by the status resource and the `system_status` tool. */
export interface SystemStatus {
  gateway: { name: string; version: string; uptimeSeconds: number };
  agents: number;
  tools: number;
  skills: number;
  workflows: number;
  proxies: number;
  sessions: number;
}

/** What the bridge is built from (the seed's constructor arguments). */
export interface MCPServiceBridgeOptions {
  toolRegistry: ToolRegistry;
  agentRegistry: DefinitionRegistry;
  skillRegistry: DefinitionRegistry;
  workflowRegistry: DefinitionRegistry;
  logger: Logger;
  clock: Clock;
  bus: EventBus;
  /** Items per page of every list. */
  pageSize: number;
  /** Counts upstream servers; the proxy manager supplies it. */
  proxyCount?: () => number;
}

interface LiveSession {
  id: string;
  info: SessionInfo;
  server: Server;
}

/** Serves MCP sessions over any transport from the engine's registries. */
export class MCPServiceBridge {
  #options: MCPServiceBridgeOptions;
  #sessions = new Map<string, LiveSession>();
  #startedAt: number;
  #unsubscribe: (() => void)[] = [];

  constructor(options: MCPServiceBridgeOptions) {
    this.#options = options;
    this.#startedAt = options.clock.now();
    const { toolRegistry, agentRegistry, skillRegistry, workflowRegistry } = options;
    this.#unsubscribe.push(
      toolRegistry.onChange(() => this.#broadcastToolsChanged()),
      agentRegistry.onChange(() => this.#broadcastDefinitionsChanged()),
      skillRegistry.onChange(() => this.#broadcastDefinitionsChanged()),
      workflowRegistry.onChange(() => this.#broadcastDefinitionsChanged()),
    );
  }

  /** Number of live sessions. */
  get sessionCount(): number {
    return this.#sessions.size;
  }

  /** Current counts of everything the gateway serves. */
  status(): SystemStatus {
    const o = this.#options;
    return {
      gateway: {
        ...GATEWAY_INFO,
        uptimeSeconds: Math.round((o.clock.now() - this.#startedAt) / 1000),
      },
      agents: o.agentRegistry.size,
      tools: o.toolRegistry.size,
      skills: o.skillRegistry.size,
      workflows: o.workflowRegistry.size,
      proxies: o.proxyCount?.() ?? 0,
      sessions: this.#sessions.size,
    };
  }

  /** Serves one MCP session over `transport` for an authenticated caller. */
  async serve(transport: Transport, info: SessionInfo): Promise<ServedSession> {
    const id = crypto.randomUUID();
    const server = this.#createServer(info);
    const live: LiveSession = { id, info, server };
    server.onclose = () => {
      if (this.#sessions.delete(id)) {
        this.#options.bus.publish({
          type: "session.closed",
          sessionId: id,
          transport: info.transport,
        });
      }
    };
    server.onerror = (error) =>
      this.#options.logger.debug("session transport error", { session: id, error: error.message });
    this.#sessions.set(id, live);
    await server.connect(transport);
    this.#options.bus.publish({
      type: "session.opened",
      sessionId: id,
      transport: info.transport,
      tenant: info.auth.tenant,
    });
    return { close: () => server.close() };
  }

  /** Closes every session. */
  async close(): Promise<void> {
    for (const unsubscribe of this.#unsubscribe) unsubscribe();
    await Promise.allSettled([...this.#sessions.values()].map((s) => s.server.close()));
    this.#sessions.clear();
  }

  #createServer(info: SessionInfo): Server {
    const o = this.#options;
    const server = new Server(GATEWAY_INFO, {
      capabilities: {
        tools: { listChanged: true },
        resources: { listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
      instructions:
        "AGENT-33 MCP gateway: native tools, proxied upstream tools (<server>__<tool>), " +
        `engine definitions as resources (${STATUS_URI} for counts) and prompts.`,
    });

    handle(server, ListToolsRequestSchema, (request) => {
      return guard(() => {
        const page = paginate(o.toolRegistry.list(), request.params?.cursor, o.pageSize);
        return { tools: page.items, ...cursor(page.nextCursor) };
      });
    });

    handle(server, CallToolRequestSchema, async (request, extra) => {
      const { name, arguments: rawArgs } = request.params;
      const tool = o.toolRegistry.get(name);
      if (!tool) {
        throw toMcpError(
          new GatewayError(
            "unknown_tool",
            `Unknown tool "${name}"; call tools/list for the names`,
            {
              tool: name,
            },
          ),
        );
      }
      let args: Record<string, unknown>;
      try {
        args = o.toolRegistry.validate(name, rawArgs ?? {});
      } catch (error) {
        throw toMcpError(error);
      }
      const progressToken = request.params._meta?.progressToken;
      const ctx: ToolCallContext = {
        auth: info.auth,
        signal: extra.signal,
        progress: async (progress, total, message) => {
          if (progressToken === undefined) return;
          await extra.sendNotification({
            method: "notifications/progress",
            params: {
              progressToken,
              progress,
              ...(total === undefined ? {} : { total }),
              ...(message === undefined ? {} : { message }),
            },
          });
        },
      };
      try {
        return await tool.handler(args, ctx);
      } catch (error) {
        if (error instanceof GatewayError) throw error.toMcpError();
        // A tool's own failure is a result the model can read, not a protocol error.
        const message = error instanceof Error ? error.message : String(error);
        o.logger.warn("native tool failed", { tool: name, error: message });
        return {
          isError: true,
          content: [{ type: "text", text: `Tool "${name}" failed: ${message}` }],
        } satisfies CallToolResult;
      }
    });

    handle(server, ListResourcesRequestSchema, (request) => {
      return guard(() => {
        const page = paginate(this.#resources(), request.params?.cursor, o.pageSize);
        return { resources: page.items, ...cursor(page.nextCursor) };
      });
    });

    handle(server, ListResourceTemplatesRequestSchema, (request) => {
      return guard(() => {
        const page = paginate(resourceTemplates(), request.params?.cursor, o.pageSize);
        return { resourceTemplates: page.items, ...cursor(page.nextCursor) };
      });
    });

    handle(server, ReadResourceRequestSchema, (request) => {
      return guard(() => {
        const { uri } = request.params;
        const text = this.#readResource(uri);
        return { contents: [{ uri, mimeType: "application/json", text }] };
      });
    });

    handle(server, ListPromptsRequestSchema, (request) => {
      return guard(() => {
        const prompts = this.#prompts().map((p) => p.prompt);
        const page = paginate(prompts, request.params?.cursor, o.pageSize);
        return { prompts: page.items, ...cursor(page.nextCursor) };
      });
    });

    handle(server, GetPromptRequestSchema, (request) => {
      return guard(() => {
        const { name, arguments: args = {} } = request.params;
        const found = this.#prompts().find((p) => p.prompt.name === name);
        if (!found) {
          throw new GatewayError(
            "not_found",
            `Unknown prompt "${name}"; call prompts/list for the names`,
            { prompt: name },
          );
        }
        for (const arg of found.prompt.arguments ?? []) {
          if (arg.required && args[arg.name] === undefined) {
            throw new GatewayError(
              "invalid_arguments",
              `Prompt "${name}" needs the argument "${arg.name}"`,
              { prompt: name, argument: arg.name },
            );
          }
        }
        return {
          description: found.prompt.description,
          messages: [{
            role: "user" as const,
            content: { type: "text" as const, text: fillTemplate(found.template, args) },
          }],
        };
      });
    });

    handle(server, CompleteRequestSchema, (request) => {
      return guard(() => {
        const { ref, argument } = request.params;
        let candidates: string[] = [];
        if (ref.type === "ref/resource") {
          const kind = DEFINITION_KINDS.find((k) => ref.uri === templateUri(k.kind));
          if (kind && argument.name === "id") {
            candidates = this.#registry(kind.kind).list().map((d) => d.id);
          }
        }
        const values = candidates.filter((c) => c.startsWith(argument.value));
        return {
          completion: {
            values: values.slice(0, 100),
            total: values.length,
            hasMore: values.length > 100,
          },
        };
      });
    });

    return server;
  }

  #registry(kind: DefinitionKind): DefinitionRegistry {
    const o = this.#options;
    switch (kind) {
      case "agents":
        return o.agentRegistry;
      case "workflows":
        return o.workflowRegistry;
      case "skills":
        return o.skillRegistry;
    }
  }

  #resources(): Resource[] {
    const resources: Resource[] = [{
      uri: STATUS_URI,
      name: "system-status",
      title: "System status",
      description: "Counts of agents, tools, skills, workflows, proxies and sessions",
      mimeType: "application/json",
    }];
    for (const { kind, noun } of DEFINITION_KINDS) {
      for (const d of this.#registry(kind).list()) {
        resources.push({
          uri: `agent33://${kind}/${encodeURIComponent(d.id)}`,
          name: d.name,
          description: d.description || `${noun} ${d.id}`,
          mimeType: "application/json",
        });
      }
    }
    return resources;
  }

  #readResource(uri: string): string {
    if (uri === STATUS_URI) return JSON.stringify(this.status(), null, 2);
    const match = /^agent33:\/\/(agents|workflows|skills)\/(.+)$/.exec(uri);
    if (match) {
      const kind = match[1] as DefinitionKind;
      const key = decodeURIComponent(match[2]!);
      const found = this.#registry(kind).find(key);
      if (found) return JSON.stringify(found.body, null, 2);
      throw new GatewayError(
        "not_found",
        `No ${kind.slice(0, -1)} with id or name "${key}"; list them with resources/list`,
        { uri },
      );
    }
    throw new GatewayError(
      "not_found",
      `Unknown resource "${uri}"; call resources/list and resources/templates/list for what exists`,
      { uri },
    );
  }

  #prompts(): { prompt: Prompt; template: string }[] {
    const o = this.#options;
    const out: { prompt: Prompt; template: string }[] = [];
    const add = (name: string, d: Definition) => {
      if (!d.prompt) return;
      out.push({
        prompt: { name, description: d.description, arguments: d.prompt.arguments },
        template: d.prompt.template,
      });
    };
    for (const skill of o.skillRegistry.list()) add(skill.id, skill);
    for (const agent of o.agentRegistry.list()) add(`agent-${agent.id}`, agent);
    return out;
  }

  #broadcastToolsChanged(): void {
    this.#options.bus.publish({ type: "tools.changed", count: this.#options.toolRegistry.size });
    this.#broadcast((s) => s.sendToolListChanged());
  }

  #broadcastDefinitionsChanged(): void {
    this.#broadcast((s) => s.sendResourceListChanged());
    this.#broadcast((s) => s.sendPromptListChanged());
  }

  #broadcast(send: (server: Server) => Promise<void>): void {
    for (const session of this.#sessions.values()) {
      send(session.server).catch((error) =>
        this.#options.logger.debug("could not notify session", {
          session: session.id,
          error: String(error),
        })
      );
    }
  }
}

function templateUri(kind: DefinitionKind): string {
  return `agent33://${kind}/{id}`;
}

function resourceTemplates(): ResourceTemplate[] {
  return DEFINITION_KINDS.map(({ kind, noun }) => ({
    uriTemplate: templateUri(kind),
    name: `${kind.slice(0, -1)}-by-id`,
    title: `${noun} definition`,
    description: `${noun} definition by id or name`,
    mimeType: "application/json",
  }));
}

function cursor(next: string | undefined): { nextCursor?: string } {
  return next === undefined ? {} : { nextCursor: next };
}

/**
 * Installs a request handler whose malformed params are answered with -32602 Invalid params.
 *
 * The SDK parses params before a handler runs and reports a failure as -32603 Internal error;
 * a client that sends `{"name": 42}` made a mistake of its own, so the parse happens here.
 */
function handle<S extends z.ZodObject>(
  server: Server,
  schema: S,
  handler: (
    request: z.infer<S>,
    extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
  ) => unknown,
): void {
  const method = (schema.shape as { method: z.ZodLiteral<string> }).method.value;
  const lenient = schema.extend({ params: z.unknown().optional() });
  server.setRequestHandler(lenient, (request, extra) => {
    const parsed = schema.safeParse(request);
    if (!parsed.success) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `Invalid params for ${method}: ${z.prettifyError(parsed.error).replaceAll("\n", "; ")}`,
      );
    }
    return handler(parsed.data, extra) as never;
  });
}

/** Runs a handler body, turning gateway errors into wire errors. */
function guard<T>(fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    throw toMcpError(error);
  }
}

/** Fills `{{name}}` placeholders; unknown placeholders are left as they are. */
function fillTemplate(template: string, args: Record<string, string>): string {
  return template.replace(
    /\{\{\s*([A-Za-z0-9_-]+)\s*\}\}/g,
    (whole, key: string) => Object.hasOwn(args, key) ? args[key]! : whole,
  );
}
