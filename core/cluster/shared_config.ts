/**
 * The fleet and policies of a cluster, from one source: the `agent33_config` bucket. At start a
 * replica seeds each document from its own fleet file and policy path only when the bucket has
 * none (create: the first replica wins, the others adopt what is there), then watches the bucket
 * and applies every newer revision through the same parse, validate, diff and apply as a file
 * reload; a document that does not validate keeps what runs and is reported as
 * `fleet.reload_failed` / `policy.reload_failed`, exactly like a bad file. Admin edits write the
 * bucket with compare-and-set on the revision ({@link SharedConfig.fleetStore}).
 * @module
 */
import type { Clock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import type { EventBus } from "../bus/event_bus.ts";
import type { SharedBucket, SharedChange, SharedState } from "../bus/shared_state.ts";
import { editFleetText, type FleetEdit, FleetEditError } from "../proxy/fleet_writer.ts";
import type { FleetStore, FleetStoreEditOptions, FleetStoreResult } from "../proxy/fleet_store.ts";
import type { FleetDiff } from "../operator/operator_host.ts";

export type { RejectedRevision, SharedConfigTarget } from "./config_source.ts";
import { parsePolicies, readPolicyFiles } from "../governance/policy_loader.ts";
import type { PolicySet } from "../governance/policy.ts";
import type { ClusterConfigSource, RejectedRevision, SharedConfigTarget } from "./config_source.ts";
import {
  CONFIG_BUCKET,
  decodeFleetDocument,
  decodePolicyDocument,
  documentOrigin,
  encodeDocument,
  FLEET_KEY,
  MAX_DOCUMENT_BYTES,
  POLICIES_KEY,
  policyDocumentOf,
  policyFiles,
} from "./config_documents.ts";
import { retryStart } from "./start_retry.ts";

/** What {@link SharedConfig} is built from. */
export interface SharedConfigOptions {
  state: SharedState;
  replicaId: string;
  target: SharedConfigTarget;
  bus: Pick<EventBus, "publish">;
  logger: Logger;
  clock: Clock;
  /** The fleet file that seeds an empty bucket (MCP_PROXY_CONFIG_PATH), if any. */
  fleetPath?: string;
  /** The policy path that seeds an empty bucket (MCP_POLICY_PATH). */
  policyPath: string;
}

/** The text an edit starts from when the bucket has no fleet yet. */
const EMPTY_FLEET =
  "# Upstream MCP servers (see docs/fleet.md), shared by the cluster.\nproxy_servers:\n";
/** Edits without an `If-Match` retry this many times when another replica wrote in between. */
const EDIT_ATTEMPTS = 3;
/** How many fleet applications are remembered, so a revision is applied once however it comes. */
const RECENT_APPLICATIONS = 8;
const NO_CHANGE: FleetDiff = { added: [], removed: [], changed: [] };

/** The cluster's shared fleet and policies, as one replica sees and applies them. */
export class SharedConfig implements ClusterConfigSource {
  readonly #options: SharedConfigOptions;
  #bucket: SharedBucket | undefined;
  #unwatch: (() => void) | undefined;
  #fleetRevision = 0;
  /** The text of the fleet revision this replica runs, what an edit starts from if the key is gone. */
  #fleetText: string | undefined;
  #policyRevision = 0;
  /** The newest revision seen of each key, applied or not. */
  #latest = { fleet: 0, policies: 0 };
  #rejected: { fleet?: RejectedRevision; policies?: RejectedRevision } = {};
  /** Applications run one at a time, newest wins: an older revision seen later is skipped. */
  #chain: Promise<unknown> = Promise.resolve();
  /** The last few fleet applications by revision: the watch and an edit share one. */
  #applied = new Map<number, Promise<unknown>>();
  #closed = false;

  constructor(options: SharedConfigOptions) {
    this.#options = options;
  }

  /** The fleet revision this replica runs (0 before any). */
  get fleetRevision(): number {
    return this.#fleetRevision;
  }

  /** The policy revision in force here (0 before any: the files or the built-in default). */
  get policyRevision(): number {
    return this.#policyRevision;
  }

  /** The last revision of each document this replica refused, while nothing newer was applied. */
  get rejected(): { fleet?: RejectedRevision; policies?: RejectedRevision } {
    return { ...this.#rejected };
  }

  /** Where edits go: the bucket, compare-and-set on the revision. */
  readonly fleetStore: FleetStore = {
    where: `${CONFIG_BUCKET}/${FLEET_KEY}`,
    revisioned: true,
    revision: () => this.#latest.fleet || undefined,
    read: async () => {
      const entry = await (await this.#open()).get(FLEET_KEY);
      return entry ? decodeFleetDocument(entry).document.text : "";
    },
    edit: (edit, options) => this.#edit(edit, options),
  };

  async #open(): Promise<SharedBucket> {
    return this.#bucket ??= await this.#options.state.bucket(CONFIG_BUCKET, {
      maxValueBytes: MAX_DOCUMENT_BYTES,
    });
  }

  /**
   * The fleet text to start with: the bucket's, or this replica's fleet file written there first
   * when the bucket has none. Undefined when neither has one. Recorded as applied: the kernel
   * starts it (and fails its start when it does not validate, as with a bad file).
   */
  startFleet(): Promise<{ text: string; origin: string } | undefined> {
    return this.#retried("fleet", () => this.#startFleet());
  }

  async #startFleet(): Promise<{ text: string; origin: string } | undefined> {
    const bucket = await this.#open();
    let entry = await bucket.get(FLEET_KEY);
    const { fleetPath, logger, target } = this.#options;
    const local = fleetPath === undefined ? undefined : await Deno.readTextFile(fleetPath).catch(
      (error) => {
        if (error instanceof Deno.errors.NotFound) return undefined;
        throw error;
      },
    );
    if (!entry && fleetPath !== undefined) {
      if (local === undefined) return undefined;
      const text = local;
      // Checked before it is shared: a bad file must not become every replica's bad document.
      target.checkFleet(text, fleetPath);
      const revision = await bucket.create(FLEET_KEY, encodeDocument(this.#stamp({ text })));
      if (revision !== null) {
        logger.info(`seeded the shared fleet from ${fleetPath} (revision ${revision})`);
      }
      entry = await bucket.get(FLEET_KEY);
    }
    if (!entry) return undefined;
    const { document, revision } = decodeFleetDocument(entry);
    this.#fleetRevision = revision;
    this.#latest.fleet = revision;
    this.#fleetText = document.text;
    const origin = `${documentOrigin(FLEET_KEY, revision)}, written by ${document.by ?? "unknown"}`;
    if (local !== undefined && local !== document.text) {
      // A ConfigMap updated after the bucket was seeded is not what runs: say so.
      logger.warn(
        `${fleetPath} differs from the shared fleet (${origin}), which is what runs: in cluster ` +
          "mode the file only seeds an empty bucket; change the fleet through the admin API",
      );
    } else {
      logger.info(`fleet from the shared bucket (${origin})`);
    }
    return { text: document.text, origin: documentOrigin(FLEET_KEY, revision) };
  }

  /**
   * The policies to start with: the bucket's, or this replica's policy files written there first
   * when the bucket has none. Throws `config_invalid` when they do not compile.
   */
  startPolicies(): Promise<PolicySet | undefined> {
    return this.#retried("policies", () => this.#startPolicies());
  }

  #retried<T>(what: string, step: () => Promise<T>): Promise<T> {
    const { clock, logger } = this.#options;
    return retryStart(what, step, { clock, logger, onRetry: () => this.#bucket = undefined });
  }

  async #startPolicies(): Promise<PolicySet | undefined> {
    const bucket = await this.#open();
    let entry = await bucket.get(POLICIES_KEY);
    const { policyPath, logger, replicaId, clock } = this.#options;
    if (!entry) {
      const files = await readPolicyFiles(policyPath);
      // A replica without policy files (a missing mount) seeds nothing: it must not hand the
      // others the permissive built-in default; it runs that default until a document appears.
      if (files.length === 0) return undefined;
      // Checked before it is shared: a seed never hands the others what they would refuse.
      parsePolicies(files, policyPath);
      const document = policyDocumentOf(files, replicaId, clock.now());
      const revision = await bucket.create(POLICIES_KEY, encodeDocument(document));
      if (revision !== null) {
        logger.info(`seeded the shared policies from ${policyPath} (revision ${revision})`);
      }
      entry = await bucket.get(POLICIES_KEY);
    }
    if (!entry) return undefined;
    const { document, revision } = decodePolicyDocument(entry);
    const files = policyFiles(document);
    this.#policyRevision = revision;
    this.#latest.policies = revision;
    // No files: what the file mode does with an empty policy directory.
    return files.length === 0
      ? undefined
      : parsePolicies(files, documentOrigin(POLICIES_KEY, revision));
  }

  /** Applies every later revision of either document, until {@link close}. */
  async watch(): Promise<void> {
    const unwatch = await this.#retried("watch", async () => {
      const bucket = await this.#open();
      return await bucket.watch((change) => this.#changed(change));
    });
    if (this.#closed) unwatch();
    else this.#unwatch = unwatch;
  }

  /** Re-reads the fleet document and applies it now; a bad one keeps the running fleet and throws. */
  async reloadFleet(): Promise<FleetDiff> {
    const entry = await (await this.#open()).get(FLEET_KEY);
    if (!entry) return NO_CHANGE;
    return await this.#applyFleetEntry(entry.revision, entry.value, true);
  }

  /** Re-reads the policy document and puts it in force now; a bad one keeps the policy and throws. */
  async reloadPolicies(): Promise<void> {
    const entry = await (await this.#open()).get(POLICIES_KEY);
    if (entry) await this.#applyPolicyEntry(entry.revision, entry.value, true);
  }

  /** Stops watching. */
  close(): void {
    this.#closed = true;
    this.#unwatch?.();
  }

  #changed(change: SharedChange): void {
    if (this.#closed) return;
    const { logger } = this.#options;
    if (change.key !== FLEET_KEY && change.key !== POLICIES_KEY) return;
    if (change.value === null) {
      logger.warn(
        `the shared ${change.key} document was deleted; what runs stays in force until a new one is written`,
      );
      return;
    }
    const apply = change.key === FLEET_KEY
      ? this.#applyFleetEntry(change.revision, change.value, false)
      : this.#applyPolicyEntry(change.revision, change.value, false);
    // Failures are logged and published where they happen; a watch has no one to throw to.
    apply.catch(() => {});
  }

  /** Applies a fleet revision unless a newer one was applied (or `force`); one at a time. */
  #applyFleetEntry(revision: number, value: Uint8Array, force: boolean): Promise<FleetDiff> {
    this.#latest.fleet = Math.max(this.#latest.fleet, revision);
    return this.#once(revision, force, async () => {
      const origin = documentOrigin(FLEET_KEY, revision);
      try {
        const { document } = decodeFleetDocument({ key: FLEET_KEY, value, revision });
        const fleet = this.#options.target.checkFleet(document.text, origin);
        const diff = await this.#options.target.applyFleet(fleet.servers, origin);
        this.#fleetText = document.text;
        return diff;
      } catch (error) {
        this.#refused("fleet", revision, error);
        throw error;
      }
    }, NO_CHANGE);
  }

  /** Runs `apply` for a fleet revision once, after earlier applications, unless it is stale. */
  #once<T>(revision: number, force: boolean, apply: () => Promise<T>, stale: T): Promise<T> {
    const known = this.#applied.get(revision);
    if (known && !force) return known as Promise<T>;
    const run = this.#chain.then(async () => {
      if (!force && revision <= this.#fleetRevision) return stale;
      const result = await apply();
      this.#fleetRevision = Math.max(this.#fleetRevision, revision);
      if ((this.#rejected.fleet?.revision ?? 0) <= revision) delete this.#rejected.fleet;
      return result;
    });
    this.#chain = run.catch(() => {});
    this.#applied.set(revision, run);
    for (const old of this.#applied.keys()) {
      if (this.#applied.size <= RECENT_APPLICATIONS) break;
      this.#applied.delete(old);
    }
    return run;
  }

  #applyPolicyEntry(revision: number, value: Uint8Array, force: boolean): Promise<void> {
    this.#latest.policies = Math.max(this.#latest.policies, revision);
    const run = this.#chain.then(() => {
      if (!force && revision <= this.#policyRevision) return;
      const origin = documentOrigin(POLICIES_KEY, revision);
      try {
        const { document } = decodePolicyDocument({ key: POLICIES_KEY, value, revision });
        this.#options.target.applyPolicies(parsePolicies(policyFiles(document), origin), origin);
      } catch (error) {
        this.#refused("policies", revision, error);
        throw error;
      }
      this.#policyRevision = Math.max(this.#policyRevision, revision);
      delete this.#rejected.policies;
    });
    this.#chain = run.catch(() => {});
    return run;
  }

  #refused(what: "fleet" | "policies", revision: number, error: unknown): void {
    const reason = error instanceof Error ? error.message : String(error);
    const path = documentOrigin(what === "fleet" ? FLEET_KEY : POLICIES_KEY, revision);
    this.#rejected[what] = { revision, reason };
    const kept = what === "fleet"
      ? "the running fleet stays"
      : "the previous policy stays in force";
    this.#options.logger.error(`shared ${what} not applied; ${kept}: ${reason}`);
    this.#options.bus.publish(
      what === "fleet"
        ? { type: "fleet.reload_failed", path, reason }
        : { type: "policy.reload_failed", path, reason },
    );
  }

  #stamp<T extends object>(document: T): T & { by: string; at: number } {
    return { ...document, by: this.#options.replicaId, at: this.#options.clock.now() };
  }

  /** An edit of the shared fleet: read, edit, validate, compare-and-set, apply here. */
  async #edit<V, R>(
    edit: FleetEdit,
    options: FleetStoreEditOptions<V, R>,
  ): Promise<FleetStoreResult<V, R>> {
    const bucket = await this.#open();
    const where = this.fleetStore.where;
    for (let attempt = 1;; attempt++) {
      const entry = await bucket.get(FLEET_KEY);
      const revision = entry?.revision ?? 0;
      if (options.revision !== undefined && options.revision !== revision) {
        throw conflict(options.revision, revision);
      }
      // A deleted document is re-created from what runs here, not from nothing.
      let before = this.#fleetText ?? EMPTY_FLEET;
      if (entry) {
        try {
          before = decodeFleetDocument(entry).document.text;
        } catch (error) {
          throw new FleetEditError("invalid", `${(error as Error).message}; write a whole new one`);
        }
      }
      const { changed, text, validated } = editFleetText(where, before, edit, options.validate);
      if (!changed) return { changed: false, validated, ...(entry ? { revision } : {}) };
      const value = encodeDocument(this.#stamp({ text }));
      const written = entry
        ? await bucket.update(FLEET_KEY, value, revision)
        : await bucket.create(FLEET_KEY, value);
      if (written === null) {
        // Another replica wrote in between: an If-Match edit is stale; a plain one edits again.
        if (options.revision !== undefined || attempt >= EDIT_ATTEMPTS) {
          throw conflict(revision, (await bucket.get(FLEET_KEY))?.revision ?? 0);
        }
        continue;
      }
      this.#latest.fleet = Math.max(this.#latest.fleet, written);
      const result: FleetStoreResult<V, R> = { changed: true, validated, revision: written };
      if (options.apply) {
        const apply = options.apply;
        // The watch delivers the same revision: whichever comes first applies it, once.
        result.applied = await this.#once(written, false, async () => {
          const applied = await apply(validated);
          this.#fleetText = text;
          return applied;
        }, undefined) as R;
      }
      return result;
    }
  }
}

function conflict(expected: number, current: number): FleetEditError {
  const message = `The shared fleet is at revision ${current}, not ${expected}: another edit ` +
    `landed first. Read it again (GET /v1/mcp/proxy/servers gives the revision), redo the change ` +
    `and send it with If-Match: "${current}"`;
  return new FleetEditError("revision_conflict", message, [message], current);
}
