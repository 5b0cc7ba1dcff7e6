/**
 * The fleet and policies of a cluster replica from its own mounted files (MCP_CLUSTER_CONFIG=
 * mounted), for deployments where the files are the source of truth (a Kubernetes ConfigMap
 * mounted into every pod, GitOps): each replica reads and watches its files as one process does,
 * the admin API's fleet edits are refused with `fleet_read_only` (a change made on one replica
 * would be undone by the next rollout and never reach the others), and the heartbeat carries a
 * digest of the text in force, so `/v1/operator/status` shows whether every replica runs the same.
 * @module
 */
import type { Clock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import { watchFile } from "../support/file_watcher.ts";
import type { EventBus } from "../bus/event_bus.ts";
import { FleetEditError } from "../proxy/fleet_writer.ts";
import type { FleetStore } from "../proxy/fleet_store.ts";
import type { FleetDiff } from "../operator/operator_host.ts";
import {
  DEFAULT_POLICY,
  parsePolicies,
  type PolicyFile,
  readPolicyFiles,
} from "../governance/policy_loader.ts";
import type { PolicySet } from "../governance/policy.ts";
import type { ClusterConfigSource, RejectedRevision, SharedConfigTarget } from "./config_source.ts";

/** What {@link MountedConfig} is built from. */
export interface MountedConfigOptions {
  target: SharedConfigTarget;
  bus: Pick<EventBus, "publish">;
  logger: Logger;
  clock: Clock;
  /** MCP_PROXY_CONFIG_PATH, if a fleet file is mounted. */
  fleetPath?: string;
  /** MCP_POLICY_PATH. */
  policyPath: string;
}

const NO_CHANGE: FleetDiff = { added: [], removed: [], changed: [] };
const encoder = new TextEncoder();

/** A short digest of text in force: `sha256:` and the first 12 hex digits. */
async function digestOf(text: string): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
  return "sha256:" + [...hash.slice(0, 6)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** A policy set's files as one text, for its digest (names included: a rename is a change). */
function policiesText(files: readonly PolicyFile[]): string {
  return files.map((f) => `${f.path.slice(f.path.lastIndexOf("/") + 1)}\n${f.text}`).join("\0");
}

/** One replica's mounted fleet and policy files, read-only to the admin API. */
export class MountedConfig implements ClusterConfigSource {
  readonly #options: MountedConfigOptions;
  #digests: { fleet?: string; policies?: string } = {};
  #rejected: { fleet?: RejectedRevision; policies?: RejectedRevision } = {};
  #unwatch: (() => void)[] = [];
  /** Reloads run one at a time, in order. */
  #chain: Promise<unknown> = Promise.resolve();

  /** Edits are refused: the mounted files are the source, and each replica has its own copy. */
  readonly fleetStore: FleetStore;

  constructor(options: MountedConfigOptions) {
    this.#options = options;
    this.fleetStore = {
      where: options.fleetPath ?? "the mounted fleet file",
      revisioned: false,
      revision: () => undefined,
      read: () => this.#readFleet().then((text) => text ?? ""),
      edit: () =>
        Promise.reject(
          new FleetEditError(
            "read_only",
            "The fleet is read from each replica's mounted file (MCP_CLUSTER_CONFIG=mounted), so " +
              "the admin API cannot change it; change the file (the ConfigMap) and let every " +
              "replica reload it, or set MCP_CLUSTER_CONFIG=shared",
          ),
        ),
    };
  }

  readonly fleetRevision = 0;
  readonly policyRevision = 0;

  get digests(): { fleet?: string; policies?: string } {
    return { ...this.#digests };
  }

  get rejected(): { fleet?: RejectedRevision; policies?: RejectedRevision } {
    return { ...this.#rejected };
  }

  async #readFleet(): Promise<string | undefined> {
    const path = this.#options.fleetPath;
    if (path === undefined) return undefined;
    return await Deno.readTextFile(path);
  }

  async startFleet(): Promise<{ text: string; origin: string } | undefined> {
    const text = await this.#readFleet();
    if (text === undefined) return undefined;
    this.#digests.fleet = await digestOf(text);
    this.#options.logger.info(`fleet from the mounted ${this.#options.fleetPath} (read-only)`);
    return { text, origin: this.#options.fleetPath! };
  }

  async startPolicies(): Promise<PolicySet | undefined> {
    const files = await readPolicyFiles(this.#options.policyPath);
    if (files.length === 0) return undefined;
    const policies = parsePolicies(files, this.#options.policyPath);
    this.#digests.policies = await digestOf(policiesText(files));
    return policies;
  }

  watch(): Promise<void> {
    const { fleetPath, policyPath, logger, clock } = this.#options;
    // Failures are logged and published by the reloads; a watcher has no one to throw to.
    if (fleetPath !== undefined) {
      this.#unwatch.push(watchFile({
        path: fleetPath,
        logger: logger.child("fleet"),
        clock,
        onChange: () => this.reloadFleet().then(() => {}, () => {}),
      }));
    }
    this.#unwatch.push(watchFile({
      path: policyPath,
      logger: logger.child("policy"),
      clock,
      onChange: () => this.reloadPolicies().catch(() => {}),
    }));
    return Promise.resolve();
  }

  reloadFleet(): Promise<FleetDiff> {
    const path = this.#options.fleetPath;
    if (path === undefined) return Promise.resolve(NO_CHANGE);
    return this.#serial(async () => {
      let text: string;
      let servers;
      try {
        text = (await this.#readFleet())!;
        servers = this.#options.target.checkFleet(text, path).servers;
      } catch (error) {
        this.#refused("fleet", path, error);
        throw error;
      }
      const diff = await this.#options.target.applyFleet(servers, path);
      this.#digests.fleet = await digestOf(text);
      delete this.#rejected.fleet;
      return diff;
    });
  }

  reloadPolicies(): Promise<void> {
    const path = this.#options.policyPath;
    return this.#serial(async () => {
      let files: PolicyFile[];
      let policies: PolicySet;
      try {
        files = await readPolicyFiles(path);
        policies = files.length === 0 ? DEFAULT_POLICY : parsePolicies(files, path);
      } catch (error) {
        this.#refused("policies", path, error);
        throw error;
      }
      this.#options.target.applyPolicies(policies, path);
      this.#digests.policies = await digestOf(policiesText(files));
      delete this.#rejected.policies;
    });
  }

  close(): void {
    for (const unwatch of this.#unwatch.splice(0)) unwatch();
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(fn, fn);
    this.#chain = run.catch(() => {});
    return run;
  }

  #refused(what: "fleet" | "policies", path: string, error: unknown): void {
    const reason = error instanceof Error ? error.message : String(error);
    this.#rejected[what] = { revision: 0, reason };
    const kept = what === "fleet"
      ? "the running fleet stays"
      : "the previous policy stays in force";
    this.#options.logger.error(`${what} not reloaded; ${kept}: ${reason}`);
    this.#options.bus.publish(
      what === "fleet"
        ? { type: "fleet.reload_failed", path, reason }
        : { type: "policy.reload_failed", path, reason },
    );
  }
}
