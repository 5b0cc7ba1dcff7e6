/**
 * The plugin API: everything a plugin may see. Plugins import this module (and npm packages),
 * never other core files.
 *
 * A plugin is a folder with a `mod.ts` whose default export is a manifest made with
 * {@link definePlugin}: a name, a version, one `kind` from a closed set, the Deno permissions it
 * needs, and a `create` factory that receives a narrow context.
 * @module
 */
import type { ScannerRule } from "./scanner_rule.ts";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { CallToolResult, LoggingLevel, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { TokenPayload } from "../auth/token_payload.ts";
import type { Clock } from "../support/clock.ts";
import type { EventBus } from "../bus/event_bus.ts";
import type { Logger } from "../support/logger.ts";
import type { TraceSpan } from "../tracing/gateway_tracer.ts";
import type { KernelToWorker, WorkerStartSpec, WorkerToKernel } from "../proxy/worker_protocol.ts";

import type { HttpRoute } from "../http/http_route.ts";
import type { SharedSessions } from "../mcp/shared_sessions.ts";
import type { SessionStage } from "./session_stage.ts";
import type { StdioStreams } from "../support/stdio_pipes.ts";

export { principalOf, sameCaller, type TokenPayload } from "../auth/token_payload.ts";
export { deadline, every, pause, settlesWithin, systemClock } from "./clock.ts";
export type { Clock, Deadline, TimerHandle } from "./clock.ts";
export type { EventBus, EventHandler } from "../bus/event_bus.ts";
export { SUBJECT_PREFIX, subjectOf } from "../bus/events.ts";
export type { GatewayEvent } from "../bus/events.ts";
export type { NonceStore } from "../bus/nonce_store.ts";
export { assertBucketName, assertSharedKey } from "../bus/shared_state.ts";
export type {
  SharedBucket,
  SharedBucketOptions,
  SharedChange,
  SharedEntry,
  SharedState,
} from "../bus/shared_state.ts";
export type { HttpRoute } from "../http/http_route.ts";
export { SharedSessions } from "../mcp/shared_sessions.ts";
export { MAX_SESSION_ID_LENGTH } from "../mcp/shared_sessions.ts";
export { SessionCache } from "../mcp/session_cache.ts";
export { newSessionRecord } from "../mcp/session_record.ts";
export type { SessionRecord } from "../mcp/session_record.ts";
export type { MessageExtra, Receive, Send, SessionStage, StageLink } from "./session_stage.ts";
export type { Logger } from "../support/logger.ts";
export type { StdioStreams } from "../support/stdio_pipes.ts";
export { GatewayError } from "../support/errors.ts";
export { retry } from "../support/retry.ts";
export { MAX_SCHEMA_WORK, SchemaCost } from "../support/schema_cost.ts";
export { urlPort } from "../support/url_port.ts";
export type { RetryPolicy } from "../support/retry.ts";
export type { KernelToWorker, WorkerStartSpec, WorkerToKernel } from "../proxy/worker_protocol.ts";

/** The closed set of extension points; the kernel handles each one exhaustively. */
export const PLUGIN_KINDS = [
  "transport",
  "upstream",
  "discovery",
  "scanner-rule",
  "bus",
  "model",
] as const;

/** One extension point. */
export type PluginKind = typeof PLUGIN_KINDS[number];

/** A Deno permission grant: `true` for all, or a list of allowed values. */
export type PermissionGrant = boolean | string[];

/** The Deno permissions a plugin needs, in the shape of `Deno.PermissionOptionsObject`. */
export interface PluginPermissions {
  read?: PermissionGrant;
  write?: PermissionGrant;
  net?: PermissionGrant;
  env?: PermissionGrant;
  run?: PermissionGrant;
  sys?: PermissionGrant;
}

/** A native tool: an MCP tool descriptor plus its handler. */
export interface NativeTool extends Tool {
  /** Runs the tool with arguments already validated against `inputSchema`. */
  handler(args: Record<string, unknown>, ctx: ToolCallContext): Promise<CallToolResult>;
}

/** What a tool handler learns about its call. */
export interface ToolCallContext {
  /** The caller. */
  auth: TokenPayload;
  /** Aborted when the client cancels or disconnects. */
  signal: AbortSignal;
  /** Sends a progress notification when the client asked for progress. */
  progress(progress: number, total?: number, message?: string): Promise<void>;
  /** The call's `_meta` (e.g. an approval token for a resumed agent run). */
  meta?: Record<string, unknown>;
  /**
   * Asks the inbound client's model through `sampling/createMessage` (params and result as in the
   * MCP spec, tools included); absent when the client does not declare sampling.
   */
  sample?(params: Record<string, unknown>, signal?: AbortSignal): Promise<Record<string, unknown>>;
  /** The call's span (tracing on): the engine's calls made for it are traced as its children. */
  span?: TraceSpan;
}

/** Lets a plugin add native tools; the returned function removes the tool again. */
export interface ToolRegistration {
  register(tool: NativeTool): () => void;
}

/** What every plugin receives: a logger, a clock, the environment, its config slice, the bus and tool registration. */
export interface PluginContext {
  logger: Logger;
  clock: Clock;
  /**
   * The resolved environment (`.env` under the process's variables), for what the platform sets
   * (e.g. KUBERNETES_SERVICE_HOST); the plugin's own settings come in `config`.
   */
  env: Readonly<Record<string, string | undefined>>;
  /** `MCP_PLUGIN_<NAME>_<KEY>` variables, keyed by `<KEY>` lower-cased; validated if the manifest has a `configSchema`. */
  config: Record<string, unknown>;
  bus: EventBus;
  tools: ToolRegistration;
  /** The loaded model providers (the ModelRouter's), for plugins that ask a model; may be absent. */
  models?: () => readonly ModelProvider[];
}

/** Server settings a transport needs. */
export interface TransportSettings {
  /** Largest accepted JSON-RPC frame or HTTP body, in bytes. */
  maxMessageBytes: number;
  /** How Streamable HTTP answers a POST: one JSON body, or an SSE stream. */
  httpResponseMode: "json" | "sse";
  /** Tenant of the trusted stdio parent. */
  stdioTenant: string;
  /** Streamable HTTP sessions idle this long (no request, no open stream) are closed; 0 = never. */
  httpSessionIdleMs: number;
  /** Bytes a legacy SSE session may have waiting for its reader before it is ended. */
  sseMaxQueueBytes: number;
  /** Messages a legacy SSE session may have waiting for its reader before it is ended. */
  sseMaxQueueMessages: number;
  /** MCP_MAX_SESSIONS: also the most copies of shared sessions a replica keeps (cluster mode). */
  maxSessions: number;
}

/** Describes one inbound MCP session to the bridge. */
export interface SessionInfo {
  /** The inbound transport's id, e.g. `stdio`, `streamable-http`, `sse`. */
  transport: string;
  /** The authenticated caller. */
  auth: TokenPayload;
  /** The transport's session id, when it has one. */
  sessionId?: string;
  /** Serve one upstream alone under its own names (`/mcp/<server_id>`). */
  upstream?: string;
  /**
   * The caller's own bearer token, from the request that opened the session: forwarded only to
   * `auth: passthrough` upstreams, never logged. See {@link bearerToken}.
   */
  bearer?: string;
  /** Cluster mode: the state the session starts from, and who hears of its changes. */
  state?: SessionStateHooks;
}

/** A session's state that outlives one replica's copy of it (cluster mode). */
export interface SessionState {
  /** The level set with `logging/setLevel`. */
  logLevel?: LoggingLevel;
  /** Tools activated in search mode, in activation order. */
  activations: readonly string[];
  /** The resource URIs (as the client named them) whose updates this copy relays. */
  subscriptions: readonly string[];
}

/** A change a session made to its {@link SessionState}, reported where it happened. */
export type SessionChange =
  | { logLevel: LoggingLevel }
  | { activations: readonly string[] }
  | { subscribed: string }
  | { unsubscribed: string };

/** How the bridge shares a session's state with the other replicas' copies. */
export interface SessionStateHooks {
  /** The state of a session rebuilt here from its shared record. */
  initial?: SessionState;
  /** Called after the session changed its state here; the request is answered once it settles. */
  changed(change: SessionChange): void | Promise<void>;
}

/** The token of a request's `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(request: Request): string | undefined {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(request.headers.get("authorization") ?? "");
  return match?.[1];
}

/** A live MCP session served by the bridge. */
export interface ServedSession {
  /** Closes the session and its transport. */
  close(): Promise<void>;
  /** Applies a state another replica's copy of the session changed to (tools list_changed when its tools changed). */
  restore?(state: SessionState): void;
}

/** What a transport plugin receives. */
export interface TransportContext extends PluginContext {
  settings: TransportSettings;
  /**
   * Serves MCP over `transport` for the given (already authenticated) caller. The transport's own
   * `stages` (transport side first) come first in the session's pipeline, before the gateway's;
   * the pipeline takes over the transport's `onmessage`, `onclose` and `onerror` slots.
   */
  serve(
    transport: Transport,
    session: SessionInfo,
    stages?: readonly SessionStage[],
  ): Promise<ServedSession>;
  /** Cluster mode (MCP_CLUSTER): opens this replica's view of the shared session records. */
  openSharedSessions?: () => Promise<SharedSessions>;
  /** Process stdio (or test streams). */
  stdio: StdioStreams;
}

/** A running inbound transport. */
export interface InboundTransport {
  /** `stdio` transports own the process streams; `http` transports mount routes. */
  mode: "stdio" | "http";
  /** Routes to mount (http mode). */
  routes?: HttpRoute[];
  /** Starts serving (stdio mode). */
  start?(): Promise<void>;
  /** Resolves when the transport has ended on its own (stdin closed). */
  done?: Promise<void>;
  /** Stops serving and closes every session. */
  close(): Promise<void>;
}

/** Fields every manifest has. */
interface ManifestBase {
  /** Unique plugin name, `[a-z0-9][a-z0-9-]*`. */
  name: string;
  /** Semver of the plugin. */
  version: string;
  /** One line: what it does. */
  description?: string;
  /** The Deno permissions the plugin needs (documented, and granted to its worker where it runs in one). */
  permissions: PluginPermissions;
  /** Validates the plugin's config slice; a failure names the variable. */
  configSchema?: {
    safeParse(input: unknown): { success: boolean; error?: unknown; data?: unknown };
  };
}

/** An inbound MCP transport. */
export interface TransportPlugin extends ManifestBase {
  kind: "transport";
  /** The transport id users select, e.g. `stdio`, `streamable-http`, `sse`. */
  transport: string;
  create(ctx: TransportContext): InboundTransport | Promise<InboundTransport>;
}

/** The parts of a fleet entry an upstream adapter reads (see core/proxy/fleet_config.ts). */
export interface UpstreamServerSpec {
  id: string;
  transport: "stdio" | "http" | "sse";
  command?: string[];
  url?: string;
  headers: Record<string, string>;
  env: Record<string, string>;
  cwd?: string;
  permissions: PluginPermissions;
  sandbox: "none" | "deno";
}

/** The sandbox and start message of one upstream's worker. */
export interface UpstreamPlan {
  /** Exactly what the worker may do; never "inherit". Unlisted permissions are denied. */
  permissions: PluginPermissions;
  /** The message the worker starts from. */
  start: WorkerStartSpec;
}

/**
 * A relay run in the kernel's thread (`isolation: inline`): given where to post its reports, it
 * returns the handler of the kernel's messages — the worker protocol without the worker.
 */
export type InlineRelay = (
  post: (message: WorkerToKernel) => void,
) => (message: KernelToWorker | null) => void;

/** Reaches upstream servers of one fleet transport through a worker relay. */
export interface UpstreamAdapter {
  /** The fleet `transport` value it serves. */
  transport: "stdio" | "http" | "sse";
  /** Module URL of the worker script that relays JSON-RPC frames. */
  workerUrl: string;
  /** The same relay for the kernel's own thread, when the adapter offers `isolation: inline`. */
  inlineRelay?: InlineRelay;
  /** Computes the worker's permissions and start message for one server. */
  plan(
    server: UpstreamServerSpec,
    options: { maxMessageBytes: number; baseEnv: Record<string, string> },
  ): UpstreamPlan;
}

/** An upstream adapter plugin. */
export interface UpstreamPlugin extends ManifestBase {
  kind: "upstream";
  create(ctx: PluginContext): UpstreamAdapter | Promise<UpstreamAdapter>;
}

/** One message of a model conversation. */
export interface ChatMessage {
  role: "user" | "assistant" | "tool";
  content: string;
  /** Tool calls the assistant proposed (assistant messages). */
  toolCalls?: ModelToolCall[];
  /** The call this message answers (tool messages). */
  toolCallId?: string;
}

/** A tool call a model proposes. */
export interface ModelToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

/** A tool offered to a model. */
export interface ModelTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

/** One completion request. */
export interface ModelRequest {
  /** The model name after `provider:`, when the agent named one. */
  model?: string;
  system: string;
  messages: ChatMessage[];
  tools: ModelTool[];
  maxTokens: number;
  signal: AbortSignal;
  /** The inbound client's sampling, when it has it (for the `sampling` provider). */
  sample?: ToolCallContext["sample"];
}

/** A model's answer: text, tool calls, or both. */
export interface ModelResponse {
  text: string;
  toolCalls: ModelToolCall[];
}

/** A model backend the engine's ModelRouter picks by name (`provider` or `provider:model`). */
export interface ModelProvider {
  /** The provider name agents use in `model:`. */
  name: string;
  complete(request: ModelRequest): Promise<ModelResponse>;
}

/** A model provider plugin. */
export interface ModelPlugin extends ManifestBase {
  kind: "model";
  create(ctx: PluginContext): ModelProvider | Promise<ModelProvider>;
}

/** An MCP server a discovery plugin found; the gateway proposes it, never adds it by itself. */
export interface DiscoveryCandidate {
  /** Stable within its source, e.g. `default/weather` for a Kubernetes Service. */
  id: string;
  transport: "http" | "sse";
  /** The server's http(s) endpoint. */
  url: string;
  /** Which discovery found it (`k8s`, `tailscale`, `lan`, …); trust is decided per source. */
  source: string;
  /** Free-form facts (namespace, tags, host) shown to the operator. */
  labels?: Record<string, string>;
  /** Set when a watching source saw the server go away. */
  removed?: true;
}

/** Finds MCP servers: a snapshot with `list`, or a live feed with `discover` (or both). */
export interface DiscoverySource {
  /** Every candidate visible now; let go of the network when `signal` aborts (a timeout). */
  list?(signal?: AbortSignal): Promise<DiscoveryCandidate[]>;
  /** Candidates as they appear and go (`removed`), until `signal` aborts. */
  discover?(signal: AbortSignal): AsyncIterable<DiscoveryCandidate>;
}

/** A discovery plugin: creating it must not reach the network yet (the kernel creates every plugin). */
export interface DiscoveryPlugin extends ManifestBase {
  kind: "discovery";
  create(ctx: PluginContext): DiscoverySource | Promise<DiscoverySource>;
}

/** An event bus backend. */
export interface BusPlugin extends ManifestBase {
  kind: "bus";
  create(ctx: PluginContext): EventBus | Promise<EventBus>;
}

export type {
  HiddenBy,
  RuleFinding,
  ScanEntity,
  ScanEntityKind,
  ScanModel,
  ScannerRule,
  ScanServer,
  ScanSeverity,
  ScanText,
} from "./scanner_rule.ts";
/** A plugin contributing scanner rules. */
export interface ScannerRulePlugin extends ManifestBase {
  kind: "scanner-rule";
  create(ctx: PluginContext): ScannerRule[] | Promise<ScannerRule[]>;
}

/** Any plugin manifest. */
export type PluginManifest =
  | TransportPlugin
  | BusPlugin
  | UpstreamPlugin
  | DiscoveryPlugin
  | ScannerRulePlugin
  | ModelPlugin;

/** Identity helper that gives a manifest its type. */
export function definePlugin<T extends PluginManifest>(manifest: T): T {
  return manifest;
}

export { StreamTransport } from "../mcp/stream_transport.ts";
export { isJsonRpcMessage, isObject, isRequestId } from "../support/jsonrpc_shape.ts";
export { jsonRpcRefusal } from "../support/jsonrpc_shape.ts";
export { serializeMessage } from "../support/wire_json.ts";
export { sessionLimitResponse } from "../mcp/session_admission.ts";
export { unreadLimitName, UnreadOutput } from "../support/unread_output.ts";
export type { UnreadLimits, UnreadOverflow } from "../support/unread_output.ts";
