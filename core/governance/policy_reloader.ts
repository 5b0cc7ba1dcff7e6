/**
 * The policy reloader: loads the policy files at start (a bad file stops start-up), and reloads
 * them when they change or an operator asks; a bad file then keeps the policy in force.
 * @module
 */
import type { EventBus } from "../bus/event_bus.ts";
import { watchFile } from "../support/file_watcher.ts";
import type { Logger } from "../support/logger.ts";
import type { PolicySet } from "./policy.ts";
import { DEFAULT_POLICY, loadPolicies } from "./policy_loader.ts";
import type { ToolGovernance } from "./tool_governance.ts";

/** What the reloader is built from. */
export interface PolicyReloaderOptions {
  /** MCP_POLICY_PATH: a file or a directory of policy files. */
  path: string;
  governance: ToolGovernance;
  logger: Logger;
  bus: EventBus;
  /** Called after every reload, put in force or not: what a tenant may see can have changed. */
  onReload: () => void;
}

/** Loads the policies into governance and keeps them current. */
export class PolicyReloader {
  readonly #options: PolicyReloaderOptions;
  #unwatch: (() => void) | undefined;

  constructor(options: PolicyReloaderOptions) {
    this.#options = options;
  }

  /**
   * Loads the policy files (or puts `shared`, a shared revision, in force instead); a bad file
   * stops start-up with every problem and its line.
   */
  async load(shared?: Promise<PolicySet | undefined>): Promise<void> {
    const { path, governance, logger } = this.#options;
    const policies = shared ? await shared ?? DEFAULT_POLICY : await loadPolicies(path);
    governance.setPolicies(policies);
    if (policies.files.length === 0) {
      logger.warn(
        `no policy files at "${path}": every tool is allowed and destructive calls need approval (MCP_POLICY_PATH)`,
      );
    } else {
      logger.info(`policies: ${policies.files.join(", ")}`);
    }
  }

  /** Re-reads the policy files now; a bad file keeps the policy in force and throws why. */
  async reload(): Promise<PolicySet> {
    const { path, logger, bus } = this.#options;
    let policies: PolicySet;
    try {
      policies = await loadPolicies(path);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      logger.error(`policies not reloaded; the previous policy stays in force: ${reason}`);
      bus.publish({ type: "policy.reload_failed", path, reason });
      this.#options.onReload();
      throw error;
    }
    this.apply(policies, path);
    return policies;
  }

  /** Puts compiled policies in force (from `origin`, a path or a shared revision). */
  apply(policies: PolicySet, origin: string): void {
    this.#options.governance.setPolicies(policies);
    this.#options.logger.info(`policies reloaded from ${origin}`);
    this.#options.bus.publish({
      type: "policy.reloaded",
      path: origin,
      files: [...policies.files],
    });
    this.#options.onReload();
  }

  /** Reloads whenever a policy file changes (a bad file is logged and refused). */
  watch(): void {
    this.#unwatch = watchFile({
      path: this.#options.path,
      logger: this.#options.logger.child("policy"),
      // reload logs and reports a refused file itself.
      onChange: () => this.reload().then(() => {}, () => {}),
    });
  }

  /** Stops watching. */
  unwatch(): void {
    this.#unwatch?.();
  }
}
