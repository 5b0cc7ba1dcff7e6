/**
 * `/v1/mcp/proxy/servers`: the upstream fleet, for operators.
 *
 * - `GET /v1/mcp/proxy/servers` and `GET …/{id}` (operator): state, breaker, health, tool count.
 * - `POST /v1/mcp/proxy/servers` (admin): body = one fleet entry as JSON, in the file's format.
 * - `DELETE …/{id}`, `POST …/{id}/enable`, `POST …/{id}/disable` (admin).
 * - `POST …/{id}/restart` (operator).
 *
 * Changes are made to the fleet file (see fleet_writer.ts), so they survive a restart, and then
 * applied at once without restarting the gateway. In cluster mode they are written to the shared
 * `agent33_config` bucket instead, compare-and-set on its revision (`If-Match: "<revision>"`
 * refuses a stale edit with 409 `revision_conflict`), and every replica applies them.
 * @module
 */
import { hasControlCharacter } from "../support/control_characters.ts";
import { jsonError } from "../http/http_listener.ts";
import type { OperatorHost } from "./operator_host.ts";
import type { HttpRoute } from "../http/http_route.ts";
import type { HandleSnapshot } from "../proxy/child_server_handle.ts";
import type { FleetServer } from "../proxy/fleet_config.ts";
import {
  addServer,
  type FleetEdit,
  FleetEditError,
  removeServer,
  setServerEnabled,
} from "../proxy/fleet_writer.ts";
import type { FleetStore } from "../proxy/fleet_store.ts";
import { type AdminAccess, methodNotAllowed, pathParams, refuseScope } from "./admin_scope.ts";

/** Where the fleet routes are mounted. */
export const SERVERS_PATH = "/v1/mcp/proxy/servers";

/** One upstream as operators see it: its configuration's switch and line, and its live state. */
export interface ServerView extends Omit<HandleSnapshot, "transport"> {
  transport: FleetServer["transport"];
  enabled: boolean;
  /** Line of the entry in the fleet file. */
  line?: number;
}

/** The view of one server: live when it runs, else its configuration (a disabled one is STOPPED). */
export function serverView(server: FleetServer | undefined, live?: HandleSnapshot): ServerView {
  const where = server ? { enabled: server.enabled, line: server.line } : { enabled: true };
  if (live) return { ...live, ...where };
  return {
    id: server?.id ?? "",
    transport: server?.transport ?? "stdio",
    state: "STOPPED",
    breaker: { state: "CLOSED", trips: 0, consecutiveFailures: 0, retryAfterMs: 0 },
    health: { consecutiveFailures: 0 },
    tools: 0,
    resources: 0,
    prompts: 0,
    restarts: 0,
    ...where,
  };
}

/** The fleet routes over the running kernel. */
export function serverRoutes(kernel: OperatorHost): HttpRoute {
  return {
    path: SERVERS_PATH,
    prefix: true,
    methods: ["GET", "POST", "DELETE"],
    async handle(request, auth) {
      const url = new URL(request.url);
      const params = pathParams(url.pathname, SERVERS_PATH);
      if (params instanceof Response) return params;
      const [id, action, ...rest] = params;
      const { method } = request;
      const what = `${method} ${url.pathname}`;
      const guard = (access: AdminAccess) => refuseScope(auth, access, what);
      if (rest.length > 0 || (action !== undefined && !ACTIONS.has(action))) {
        return jsonError(
          404,
          "not_found",
          `Nothing is served at ${url.pathname}; use ${SERVERS_PATH}/{id} with /enable, /disable or /restart`,
        );
      }
      if (id === undefined) {
        if (method === "GET") return guard("read") ?? list(kernel);
        if (method === "POST") return guard("admin") ?? await add(kernel, request);
        return methodNotAllowed(method, url.pathname, ["GET", "POST"]);
      }
      // Before any service: an id no fleet entry can have never reaches the fleet file.
      if (!SERVER_ID.test(id)) return guard("read") ?? invalidId(id);
      if (action === undefined) {
        if (method === "GET") return guard("read") ?? one(kernel, id);
        if (method === "DELETE") {
          return guard("admin") ??
            await mutate(kernel, request, id, removeServer(id), () => ({ removed: id }));
        }
        return methodNotAllowed(method, url.pathname, ["GET", "DELETE"]);
      }
      if (method !== "POST") return methodNotAllowed(method, url.pathname, ["POST"]);
      if (action === "restart") return guard("operate") ?? await restart(kernel, id);
      const enabled = action === "enable";
      return guard("admin") ??
        await mutate(kernel, request, id, setServerEnabled(id, enabled), () => ({
          server: current(kernel, id),
        }));
    },
  };
}

const ACTIONS = new Set(["enable", "disable", "restart"]);
/** The fleet file's id rule (core/proxy/fleet_config.ts). */
const SERVER_ID = /^[a-z0-9][a-z0-9_-]*$/;
/** Fleet entries are a few levels deep; anything deeper is not one (and would cost a deep walk). */
const MAX_ENTRY_DEPTH = 8;

function invalidId(id: string): Response {
  return jsonError(
    400,
    "invalid_id",
    `${JSON.stringify(id.slice(0, 100))} is not a server id: ids are lowercase letters, digits, ` +
      `_ and -, starting with a letter or digit; list them with GET ${SERVERS_PATH}`,
  );
}

/**
 * Where a posted entry holds a key or string with a control character, or nests too deeply, or
 * undefined. Line breaks in an id, a command or a header are how one would smuggle keys into the
 * YAML file or headers into an upstream request: the writer quotes them, but no fleet value
 * needs one, so they are refused before the file is touched.
 */
function unsafeField(entry: Record<string, unknown>): string | undefined {
  const stack: [unknown, string, number][] = [[entry, "", 0]];
  while (stack.length > 0) {
    const [value, where, depth] = stack.pop()!;
    if (typeof value === "string") {
      if (hasControlCharacter(value)) return `${where} holds a control character (a line break?)`;
      continue;
    }
    if (typeof value !== "object" || value === null) continue;
    if (depth >= MAX_ENTRY_DEPTH) return `${where} is nested more than ${MAX_ENTRY_DEPTH} levels`;
    if (Array.isArray(value)) {
      value.forEach((item, i) => stack.push([item, `${where}[${i}]`, depth + 1]));
      continue;
    }
    for (const [key, item] of Object.entries(value)) {
      const path = where === "" ? key : `${where}.${key}`;
      if (hasControlCharacter(key)) {
        return `the key ${JSON.stringify(path)} holds a control character`;
      }
      stack.push([item, path, depth + 1]);
    }
  }
  return undefined;
}

function list(kernel: OperatorHost): Response {
  const ids = new Set([
    ...kernel.fleet.map((s) => s.id),
    ...kernel.proxy.handles().map((h) => h.id),
  ]);
  const revision = kernel.fleetStore?.revision();
  return Response.json(
    { servers: [...ids].map((id) => current(kernel, id)), ...(revision ? { revision } : {}) },
    revision ? { headers: { ETag: `"${revision}"` } } : {},
  );
}

function current(kernel: OperatorHost, id: string): ServerView | undefined {
  const server = kernel.fleet.find((s) => s.id === id);
  const live = kernel.proxy.get(id)?.snapshot();
  if (!server && !live) return undefined;
  return serverView(server, live);
}

function one(kernel: OperatorHost, id: string): Response {
  const view = current(kernel, id);
  return view ? Response.json(view) : unknownServer(kernel, id);
}

function unknownServer(kernel: OperatorHost, id: string): Response {
  const where = kernel.config.proxy.configPath ?? "the fleet (no fleet file is configured)";
  return jsonError(
    404,
    "not_found",
    `No upstream server "${id}" in ${where}; list them with GET ${SERVERS_PATH}`,
  );
}

async function restart(kernel: OperatorHost, id: string): Promise<Response> {
  const handle = kernel.proxy.get(id);
  if (!handle) {
    if (!kernel.fleet.some((s) => s.id === id)) return unknownServer(kernel, id);
    return jsonError(
      409,
      "server_disabled",
      `Upstream server "${id}" is disabled, so there is nothing to restart; enable it with POST ${SERVERS_PATH}/${id}/enable`,
    );
  }
  await handle.restart();
  return Response.json({ server: current(kernel, id) });
}

async function add(kernel: OperatorHost, request: Request): Promise<Response> {
  let entry: unknown;
  try {
    entry = await request.json();
  } catch {
    return jsonError(
      400,
      "invalid_request",
      'The body must be one fleet entry as JSON, e.g. {"id": "github", "command": ["npx", "-y", "@modelcontextprotocol/server-github"]}',
    );
  }
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
    return jsonError(
      400,
      "invalid_request",
      'The body must be one fleet entry as a JSON object with at least an id, e.g. {"id": "web", "url": "https://mcp.example.com/mcp"}',
    );
  }
  const unsafe = unsafeField(entry as Record<string, unknown>);
  if (unsafe !== undefined) {
    return jsonError(
      400,
      "invalid_fleet",
      `The entry was refused and the fleet file left unchanged: ${unsafe}. Fleet values are ` +
        "single-line; pass multi-line values through the environment with ${VAR}",
    );
  }
  const id = (entry as { id?: unknown }).id;
  return await mutate(
    kernel,
    request,
    typeof id === "string" ? id : "",
    addServer(entry as Record<string, unknown>),
    () => ({ server: typeof id === "string" ? current(kernel, id) : undefined }),
    201,
  );
}

/** Edits the fleet (its file, or the shared bucket), validated first, then applies it; refusals change nothing. */
async function mutate(
  kernel: OperatorHost,
  request: Request,
  id: string,
  edit: FleetEdit,
  answer: () => Record<string, unknown>,
  status = 200,
): Promise<Response> {
  const store = kernel.fleetStore;
  if (store === undefined) {
    return jsonError(
      409,
      "no_fleet_file",
      "No fleet file is configured, so there is nowhere to keep this change; set MCP_PROXY_CONFIG_PATH (or serve --config FILE) and restart the gateway",
    );
  }
  const revision = expectedRevision(request, store);
  if (revision instanceof Response) return revision;
  try {
    const result = await store.edit(edit, {
      validate: (text) => kernel.checkFleet(text, store.where),
      apply: (fleet) => kernel.applyFleet(fleet.servers),
      ...(revision === undefined ? {} : { revision }),
    });
    return Response.json({
      ...answer(),
      changed: result.changed,
      fleet: result.applied ?? { added: [], removed: [], changed: [] },
      ...(result.revision ? { revision: result.revision } : {}),
    }, {
      status: result.changed ? status : 200,
      ...(result.revision ? { headers: { ETag: `"${result.revision}"` } } : {}),
    });
  } catch (error) {
    if (!(error instanceof FleetEditError)) throw error;
    return fleetEditRefusal(error) ?? unknownServer(kernel, id);
  }
}

/** The answer to a refused edit (undefined for `not_found`, which the caller words). */
export function fleetEditRefusal(error: FleetEditError): Response | undefined {
  if (error.kind === "not_found") return undefined;
  if (error.kind === "conflict") return jsonError(409, "conflict", error.message);
  if (error.kind === "read_only") return jsonError(409, "fleet_read_only", error.message);
  if (error.kind === "revision_conflict") {
    return Response.json(
      { error: { code: "revision_conflict", message: error.message, revision: error.revision } },
      { status: 409, headers: { ETag: `"${error.revision}"` } },
    );
  }
  return jsonError(400, "invalid_fleet", error.message);
}

/**
 * The revision an edit is based on, from `If-Match: "<revision>"` (cluster mode only: the fleet
 * file has no revisions, so a conditional edit there is refused rather than done unconditionally).
 */
export function expectedRevision(
  request: Request,
  store: FleetStore,
): number | undefined | Response {
  const header = request.headers.get("if-match");
  if (header === null) return undefined;
  const match = /^\s*(?:W\/)?"?(\d{1,15})"?\s*$/.exec(header);
  if (!store.revisioned) {
    return jsonError(
      400,
      "invalid_request",
      "If-Match needs the shared fleet of cluster mode (MCP_CLUSTER=true, MCP_CLUSTER_CONFIG=shared): the fleet file has no revisions; send the edit without it",
    );
  }
  if (!match) {
    return jsonError(
      400,
      "invalid_request",
      `If-Match must be one fleet revision, e.g. If-Match: "12" (GET ${SERVERS_PATH} gives it as ETag)`,
    );
  }
  return Number(match[1]);
}
