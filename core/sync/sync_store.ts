/**
 * The proposals an operator reviews through the admin API: the last registry run's and the
 * discovery plugins' candidates, side by side, until they are applied or replaced.
 * @module
 */
import type { SyncProposal } from "./sync_plan.ts";
import type { SyncResult } from "./sync_run.ts";

/** Pending proposals of one gateway. */
export class SyncProposals {
  #registry: SyncResult | undefined;
  #discovered: SyncProposal[] = [];

  /** Replaces the registry run's proposals. */
  setRegistry(result: SyncResult): void {
    this.#registry = result;
  }

  /** Replaces the discovery candidates. */
  setDiscovered(proposals: SyncProposal[]): void {
    this.#discovered = proposals;
  }

  /** The last registry run, if any. */
  get registry(): SyncResult | undefined {
    return this.#registry;
  }

  /** Every pending proposal, registry first. */
  list(): SyncProposal[] {
    return [...(this.#registry?.proposals ?? []), ...this.#discovered];
  }

  /** Forgets proposals once applied. */
  drop(ids: ReadonlySet<string>): void {
    if (this.#registry) {
      this.#registry = {
        ...this.#registry,
        proposals: this.#registry.proposals.filter((p) => !ids.has(p.id)),
      };
    }
    this.#discovered = this.#discovered.filter((p) => !ids.has(p.id));
  }
}

const stores = new WeakMap<object, SyncProposals>();

/** The proposals of one gateway (keyed by its kernel). */
export function proposalsOf(owner: object): SyncProposals {
  let store = stores.get(owner);
  if (!store) stores.set(owner, store = new SyncProposals());
  return store;
}
