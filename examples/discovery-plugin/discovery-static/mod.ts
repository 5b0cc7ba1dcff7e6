/**
 * An example third-party discovery plugin: proposes the MCP servers listed in a JSON file, e.g.
 * one a provisioning tool writes. Load it with `MCP_PLUGIN_PATHS=examples/discovery-plugin` and
 * point it at the file with `MCP_PLUGIN_DISCOVERY_STATIC_FILE=servers.json`:
 *
 * ```json
 * [{ "id": "notes", "url": "http://notes.internal:8080/mcp", "transport": "http" }]
 * ```
 *
 * It implements both halves of a DiscoverySource: `list()` for a snapshot, and `discover()`
 * (a live feed) by re-reading the file whenever it changes.
 * @module
 */
import {
  definePlugin,
  type DiscoveryCandidate,
  type DiscoverySource,
} from "../../../core/plugin_api/mod.ts";

/** Reads the file as candidates; the source name is what MCP_DISCOVERY_TRUSTED lists. */
async function readCandidates(file: string): Promise<DiscoveryCandidate[]> {
  const entries = JSON.parse(await Deno.readTextFile(file));
  if (!Array.isArray(entries)) {
    throw new Error(`discovery-static: ${file} must hold a JSON list of { id, url, transport }`);
  }
  return entries.map((entry, i) => {
    if (typeof entry?.id !== "string" || typeof entry?.url !== "string") {
      throw new Error(`discovery-static: ${file}[${i}] needs a string id and url`);
    }
    return {
      id: entry.id,
      url: entry.url,
      transport: entry.transport === "sse" ? "sse" : "http",
      source: "static",
      labels: { file },
    };
  });
}

export default definePlugin({
  name: "discovery-static",
  version: "1.0.0",
  kind: "discovery",
  description: "Proposes the MCP servers listed in a JSON file",
  permissions: { read: true },
  create(ctx): DiscoverySource {
    const file = ctx.config.file;
    // Creating must not fail or reach out: the kernel creates every plugin it finds.
    const need = (): string => {
      if (typeof file !== "string" || file === "") {
        throw new Error("discovery-static: set MCP_PLUGIN_DISCOVERY_STATIC_FILE to a JSON file");
      }
      return file;
    };
    return {
      list: () => readCandidates(need()),
      async *discover(signal) {
        const path = need();
        let previous = new Map<string, DiscoveryCandidate>();
        const watcher = Deno.watchFs(path);
        signal.addEventListener("abort", () => watcher.close(), { once: true });
        try {
          while (!signal.aborted) {
            const current = new Map((await readCandidates(path)).map((c) => [c.id, c]));
            for (const [id, c] of previous) {
              if (!current.has(id)) yield { ...c, removed: true };
            }
            yield* current.values();
            previous = current;
            // Wait for the next change (the loop ends when the watcher closes).
            const next = await watcher[Symbol.asyncIterator]().next();
            if (next.done) return;
          }
        } finally {
          if (!signal.aborted) watcher.close();
        }
      },
    };
  },
});
