/**
 * Watches the fleet file and reloads it on change; an invalid new file keeps the running fleet
 * and is reported (log line and `fleet.reload_failed` event).
 * @module
 */
import type { Logger } from "../logger.ts";

/** Options for {@link watchFile}. */
export interface WatchFileOptions {
  path: string;
  logger: Logger;
  /** Editors write in bursts; changes within this window reload once. */
  debounceMs?: number;
  onChange: () => Promise<void>;
}

/** Starts watching; the returned function stops it. */
export function watchFile(options: WatchFileOptions): () => void {
  const { path, logger, debounceMs = 200, onChange } = options;
  let watcher: Deno.FsWatcher;
  try {
    // Watch the directory: editors replace the file (rename), which ends a watch on the file itself.
    const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) || "/" : ".";
    watcher = Deno.watchFs(dir, { recursive: false });
  } catch (error) {
    logger.warn(`cannot watch ${path} for changes; edits need a restart`, { error: String(error) });
    return () => {};
  }
  const name = path.slice(path.lastIndexOf("/") + 1);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running = Promise.resolve();
  const loop = (async () => {
    try {
      for await (const event of watcher) {
        if (!event.paths.some((p) => p.endsWith("/" + name) || p === name)) continue;
        clearTimeout(timer);
        timer = setTimeout(() => {
          running = running.then(onChange).catch((error) =>
            logger.error(`reloading ${path} failed`, { error: String(error) })
          );
        }, debounceMs);
      }
    } catch {
      // The watcher was closed.
    }
  })();
  return () => {
    clearTimeout(timer);
    watcher.close();
    void loop;
  };
}
