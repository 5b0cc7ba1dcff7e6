/**
 * ToolActivationManager: the tools each session activated in `search` discovery mode, bounded in
 * size and forgotten when the session ends.
 * @module
 */

/** Activated tool names per session. */
export class ToolActivationManager {
  #sessions = new Map<string, Set<string>>();
  #limit: number;

  /** `limit`: most tools one session may have active at once. */
  constructor(limit = 64) {
    this.#limit = limit;
  }

  /** The session's active tools, in activation order. */
  active(session: string): readonly string[] {
    return [...(this.#sessions.get(session) ?? [])];
  }

  /** Whether a tool is active in the session. */
  isActive(session: string, name: string): boolean {
    return this.#sessions.get(session)?.has(name) ?? false;
  }

  /**
   * Activates tools; past the limit the oldest activations make room. Returns the names newly
   * activated and those evicted.
   */
  activate(session: string, names: readonly string[]): { added: string[]; evicted: string[] } {
    const set = this.#sessions.get(session) ?? new Set<string>();
    this.#sessions.set(session, set);
    const added: string[] = [];
    const evicted: string[] = [];
    for (const name of names) {
      if (set.has(name)) continue;
      set.add(name);
      added.push(name);
      if (set.size > this.#limit) {
        const oldest = set.values().next().value!;
        set.delete(oldest);
        evicted.push(oldest);
      }
    }
    return { added, evicted };
  }

  /** Deactivates tools; returns those that were active. */
  deactivate(session: string, names: readonly string[]): string[] {
    const set = this.#sessions.get(session);
    if (!set) return [];
    return names.filter((name) => set.delete(name));
  }

  /**
   * Makes exactly `names` active, in that order (a copy of the session restored from its shared
   * record); past the limit the last ones win. Whether the active set changed.
   */
  replace(session: string, names: readonly string[]): boolean {
    const before = this.active(session);
    const kept = [...new Set(names)].slice(-this.#limit);
    if (kept.length === 0) this.#sessions.delete(session);
    else this.#sessions.set(session, new Set(kept));
    return before.length !== kept.length || before.some((name, i) => name !== kept[i]);
  }

  /** Forgets a session (it ended). */
  forget(session: string): void {
    this.#sessions.delete(session);
  }

  /** Number of sessions with activations. */
  get sessions(): number {
    return this.#sessions.size;
  }
}
