/**
 * The admin API of registry sync and discovery, under `/v1/mcp/sync/`:
 *
 * - `GET  proposals` (operator): pending proposals from the last run and from discovery — the
 *   live candidates of running discovery (MCP_DISCOVERY), else the last `?discover=true` round;
 *   `?discover=true` asks the sources again first, bounded by MCP_DISCOVERY_TIMEOUT_MS;
 * - `POST run` (admin), body `{ registry, full?, search?, include? }`: reads the registry and
 *   replaces the registry proposals, answering them with their digests;
 * - `POST apply` (admin), body `{ ids: [...], digests: { id: digest } }`: writes the chosen
 *   proposals to the fleet file (validated, atomic, comments kept) and applies the fleet at once;
 *   each id needs the digest it was listed with (what the operator reviewed), and a proposal
 *   whose digest is no longer that one refuses the whole request (409 `proposal_changed`).
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
import { type ListedProposal, listedProposals } from "../sync/proposal_identity.ts";
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

/** Every pending proposal with its digest, one per id: the registry run's, then discovery's. */
export function pendingProposals(kernel: OperatorHost): ListedProposal[] {
  const store = proposalsOf(kernel);
  // Worked out from the live candidates on each ask: applied ones drop out as the fleet has them.
  const all: SyncProposal[] = kernel.discovery
    ? [
      ...(store.registry?.proposals ?? []),
      ...candidateProposals(kernel.discovery.candidates, kernel.fleet, trustedSources(kernel.env)),
    ]
    : store.list();
  return listedProposals(all, (kept, shadowed) => warnShadowed(kernel, kept, shadowed));
}

const warned = new WeakMap<object, Set<string>>();

/**
 * Says once per id and source that a proposal is left out: the listing is read on every
 * dashboard refresh, and a line per read would bury the log. The set is bounded by the ids a
 * registry run proposes, since only those can be shadowed.
 */
function warnShadowed(kernel: OperatorHost, kept: SyncProposal, shadowed: SyncProposal): void {
  let seen = warned.get(kernel);
  if (!seen) warned.set(kernel, seen = new Set());
  const key = `${shadowed.id} ${shadowed.source}`;
  if (seen.has(key)) return;
  seen.add(key);
  kernel.logger.child("sync").warn(
    `proposal ${shadowed.id} from ${shadowed.source} is not listed and cannot be applied: ` +
      `${kept.source} proposes the same id; once that one is applied, this one is proposed ` +
      "under an id of its own",
    { id: shadowed.id, source: shadowed.source, kept: kept.source },
  );
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
    // With their digests, so what a script reviews here is what it can apply.
    return Response.json({ ...result, proposals: listedProposals(result.proposals) });
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
  const digests = expectedDigests(body.digests, ids as string[]);
  if (digests instanceof Response) return digests;
  const store = proposalsOf(kernel);
  // Unique ids (pendingProposals keeps one per id), so this map drops nothing.
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
  const unreviewed = missingDigests(digests, ids);
  if (unreviewed) return unreviewed;
  const chosen = ids.map((id) => pending.get(id)!);
  // What is written is `chosen`, these very objects, so a passed check cannot be raced.
  const changed = chosen.filter((p) => digests.get(p.id) !== p.digest);
  if (changed.length > 0) {
    return jsonError(
      409,
      "proposal_changed",
      `Proposal ${
        changed.map((p) => `"${p.id}"`).join(", ")
      } changed since it was listed (its digest differs), so nothing was applied; ` +
        `review it again: reload GET ${SYNC_PATH}/proposals and apply with the digest listed now`,
    );
  }
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

/** Where an operator finds a proposal's digest. */
const LISTED_AT = `as GET ${SYNC_PATH}/proposals (or POST ${SYNC_PATH}/run) lists it`;

/**
 * The `digests` of an apply body by id, or the 400 refusing it. Without
 * a digest an id names only a slot, whose content a registry or an announcement can change
 * between the review and the click, so none is applied on its id alone.
 */
function expectedDigests(value: unknown, ids: readonly string[]): Map<string, string> | Response {
  // Absent, each id lacks its digest, which is said once the ids are known (a 404 comes first).
  if (value === undefined) return new Map();
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return jsonError(400, "invalid_request", mustGive(ids));
  }
  const entries = Object.entries(value);
  const bad = entries.find(([, digest]) => typeof digest !== "string");
  if (bad) {
    return jsonError(
      400,
      "invalid_request",
      `digests["${bad[0]}"] must be a string: ${digestsExample(ids)}`,
    );
  }
  // A digest for an id not applied would be a check that silently never runs (a typo in the id).
  const stray = entries.find(([id]) => !ids.includes(id));
  if (stray) {
    return jsonError(
      400,
      "invalid_request",
      `digests names "${stray[0]}", which is not in ids; give a digest only for an id applied`,
    );
  }
  return new Map(entries as [string, string][]);
}

/** The 400 for ids given without a digest, or undefined when each has one. */
function missingDigests(
  digests: Map<string, string>,
  ids: readonly string[],
): Response | undefined {
  const missing = ids.filter((id) => !digests.has(id));
  if (missing.length === 0) return undefined;
  if (digests.size === 0) return jsonError(400, "invalid_request", mustGive(ids));
  return jsonError(
    400,
    "invalid_request",
    `digests gives none for ${missing.map((id) => `"${id}"`).join(", ")}; give each id's ` +
      `digest ${LISTED_AT}: apply writes only the proposal that was reviewed`,
  );
}

/** The refusal of an apply that gives no digests object, with an example for its own ids. */
function mustGive(ids: readonly string[]): string {
  return `digests must be an object giving each id's digest ${LISTED_AT}, e.g. ` +
    `${digestsExample(ids)}: apply writes only the proposal that was reviewed`;
}

/** An apply body for the first of `ids`, as a request should send it. */
function digestsExample(ids: readonly string[]): string {
  return `{"ids": ["${ids[0]}"], "digests": {"${ids[0]}": "<its digest>"}}`;
}

/** `MCP_DISCOVERY_TRUSTED`: discovery sources whose candidates are added enabled. */
export function trustedSources(env: Readonly<Record<string, string | undefined>>): Set<string> {
  return new Set(
    (env.MCP_DISCOVERY_TRUSTED ?? "").split(",").map((s) => s.trim()).filter(Boolean),
  );
}
