/**
 * The admin API of registry sync and discovery, under `/v1/mcp/sync/`:
 *
 * - `GET  proposals` (operator): pending proposals from the last run and from discovery — the
 *   live candidates of running discovery (MCP_DISCOVERY), else the last `?discover=true` round;
 *   `?discover=true` asks the sources again first, bounded by MCP_DISCOVERY_TIMEOUT_MS;
 * - `POST run` (admin), body `{ registry, full?, search?, include? }`: reads the registry and
 *   replaces the registry proposals;
 * - `POST apply` (admin), body `{ ids: [...] }`: writes the chosen proposals to the fleet file
 *   (validated, atomic, comments kept) and applies the fleet at once.
 * @module
 */
import type { OperatorHost } from "./operator_host.ts";
import { jsonError } from "../http/http_listener.ts";
import type { HttpRoute } from "../http/http_route.ts";
import { type AdminAccess, methodNotAllowed, refuseScope } from "./admin_scope.ts";
import { FleetEditError } from "../proxy/fleet_writer.ts";
import { fleetEditRefusal } from "./admin_server_routes.ts";
import { candidateProposals, discoverOnce } from "../sync/discovery_service.ts";
import type { SyncProposal } from "../sync/sync_plan.ts";
import { RegistryError } from "../sync/registry_client.ts";
import { applyProposals } from "../sync/sync_apply.ts";
import { planFromRegistry } from "../sync/sync_run.ts";
import { writeSyncState } from "../sync/sync_state.ts";
import { proposalsOf } from "../sync/sync_store.ts";

/** Where the routes live. */
export const SYNC_PATH = "/v1/mcp/sync";

const OPERATIONS: Record<string, { method: "GET" | "POST"; access: AdminAccess }> = {
  proposals: { method: "GET", access: "read" },
  run: { method: "POST", access: "admin" },
  apply: { method: "POST", access: "admin" },
};

/** One prefix route serving every sync operation. */
export function syncRoutes(kernel: OperatorHost): HttpRoute[] {
  return [{
    path: SYNC_PATH,
    prefix: true,
    methods: ["GET", "POST"],
    async handle(request, auth) {
      const path = new URL(request.url).pathname;
      const name = path.slice(SYNC_PATH.length + 1);
      const operation = OPERATIONS[name];
      const what = `${request.method} ${path}`;
      if (!operation) {
        return refuseScope(auth, "read", what) ?? jsonError(
          404,
          "not_found",
          `No sync operation "${name}"; use GET ${SYNC_PATH}/proposals, POST ${SYNC_PATH}/run or POST ${SYNC_PATH}/apply`,
        );
      }
      if (request.method !== operation.method) {
        return methodNotAllowed(request.method, path, [operation.method]);
      }
      const refused = refuseScope(auth, operation.access, what);
      if (refused) return refused;
      if (name === "proposals") return await proposals(kernel, new URL(request.url));
      const fleetPath = kernel.config.proxy.configPath;
      if (fleetPath === undefined) {
        return jsonError(
          409,
          "no_fleet_file",
          "No fleet file is configured, so there is nothing to sync; set MCP_PROXY_CONFIG_PATH (or serve --config FILE) and restart the gateway",
        );
      }
      const body = await request.json().catch(() => undefined);
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        return jsonError(
          400,
          "invalid_request",
          name === "run"
            ? 'The body must be JSON like {"registry": "https://registry.modelcontextprotocol.io"}'
            : 'The body must be JSON like {"ids": ["add:acme-weather"]}; list them with GET /v1/mcp/sync/proposals',
        );
      }
      return name === "run"
        ? await run(kernel, fleetPath, body as Record<string, unknown>)
        : await apply(kernel, fleetPath, body as Record<string, unknown>);
    },
  }];
}

/** Every pending proposal: the registry run's, then discovery's (live when it runs). */
export function pendingProposals(kernel: OperatorHost): SyncProposal[] {
  const store = proposalsOf(kernel);
  if (!kernel.discovery) return store.list();
  // Worked out from the live candidates on each ask: applied ones drop out as the fleet has them.
  const live = candidateProposals(
    kernel.discovery.candidates,
    kernel.fleet,
    trustedSources(kernel.env),
  );
  return [...(store.registry?.proposals ?? []), ...live];
}

async function proposals(kernel: OperatorHost, url: URL): Promise<Response> {
  const store = proposalsOf(kernel);
  // A source that fails (not in a cluster, no tailscale) is reported, not fatal to the others.
  let discoveryErrors: string[] | undefined;
  if (url.searchParams.get("discover") === "true") {
    if (kernel.discovery) {
      discoveryErrors = await kernel.discovery.refresh();
    } else {
      const round = await discoverOnce(kernel.pluginsOf("discovery"), kernel.fleet, {
        trusted: trustedSources(kernel.env),
        timeoutMs: kernel.config.discovery.timeoutMs,
        clock: kernel.clock,
      });
      store.setDiscovered(round.proposals);
      discoveryErrors = round.errors;
    }
  }
  const registry = store.registry;
  return Response.json({
    proposals: pendingProposals(kernel),
    ...(kernel.discovery ? { discovery: { running: kernel.discovery.plugins } } : {}),
    ...(discoveryErrors ? { discoveryErrors } : {}),
    registry: registry
      ? {
        registry: registry.registry,
        readAt: registry.readAt,
        ...(registry.updatedSince ? { updatedSince: registry.updatedSince } : {}),
        skipped: registry.skipped,
        unchanged: registry.unchanged,
      }
      : null,
  });
}

async function run(kernel: OperatorHost, fleetPath: string, body: Record<string, unknown>) {
  const { registry, full, search, include } = body;
  if (typeof registry !== "string" || !/^https?:\/\//.test(registry)) {
    return jsonError(
      400,
      "invalid_request",
      'registry must be an http(s) URL, e.g. {"registry": "https://registry.modelcontextprotocol.io"}',
    );
  }
  try {
    const store = kernel.fleetStore;
    const result = await planFromRegistry({
      registry,
      fleetPath,
      ...(store?.revisioned ? { fleetText: await store.read() } : {}),
      env: { ...kernel.env },
      ...(full === true ? { full: true } : {}),
      ...(typeof search === "string" ? { search } : {}),
      ...(Array.isArray(include) ? { include: include.map(String) } : {}),
    });
    proposalsOf(kernel).setRegistry(result);
    return Response.json(result);
  } catch (error) {
    if (error instanceof RegistryError) return jsonError(502, "registry_failed", error.message);
    throw error;
  }
}

async function apply(kernel: OperatorHost, fleetPath: string, body: Record<string, unknown>) {
  const ids = body.ids;
  if (!Array.isArray(ids) || ids.length === 0 || !ids.every((id) => typeof id === "string")) {
    return jsonError(
      400,
      "invalid_request",
      'ids must be a non-empty list of proposal ids, e.g. {"ids": ["add:acme-weather"]}',
    );
  }
  const store = proposalsOf(kernel);
  const pending = new Map(pendingProposals(kernel).map((p) => [p.id, p]));
  const unknown = ids.filter((id) => !pending.has(id));
  if (unknown.length > 0) {
    return jsonError(
      404,
      "not_found",
      `No pending proposal ${
        unknown.map((id) => `"${id}"`).join(", ")
      }; list them with GET ${SYNC_PATH}/proposals (POST ${SYNC_PATH}/run first)`,
    );
  }
  const chosen = ids.map((id) => pending.get(id)!);
  try {
    const result = await applyProposals(
      kernel.fleetStore ?? fleetPath,
      chosen,
      (text) => kernel.checkFleet(text, fleetPath),
      (fleet) => kernel.applyFleet(fleet.servers),
    );
    const registry = store.registry;
    store.drop(new Set(ids));
    // Remembered only once every registry proposal is applied: a skipped one must come back.
    if (registry && !registry.filtered && store.registry?.proposals.length === 0) {
      await writeSyncState(fleetPath, { registry: registry.registry, lastSync: registry.readAt });
    }
    return Response.json({
      applied: ids,
      changed: result.changed,
      fleet: result.applied ?? { added: [], removed: [], changed: [] },
    });
  } catch (error) {
    if (!(error instanceof FleetEditError)) throw error;
    return fleetEditRefusal(error) ?? jsonError(404, "not_found", error.message);
  }
}

/** `MCP_DISCOVERY_TRUSTED`: discovery sources whose candidates are added enabled. */
export function trustedSources(env: Readonly<Record<string, string | undefined>>): Set<string> {
  return new Set(
    (env.MCP_DISCOVERY_TRUSTED ?? "").split(",").map((s) => s.trim()).filter(Boolean),
  );
}
