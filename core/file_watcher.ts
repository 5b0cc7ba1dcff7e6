/**
 * Watches a configuration file (the fleet) or directory (the policies) and calls back, debounced,
 * when it changes. Reload logic stays with the caller: an invalid new file keeps what runs.
 * @module
 */
import type { Logger } from "./logger.ts";

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
  let isDir = false;
  try {
    isDir = Deno.statSync(path).isDirectory;
  } catch {
    // A missing path: watch its directory for it to appear.
  }
  try {
    // Watch the directory: editors replace the file (rename), which ends a watch on the file itself.
    const dir = isDir
      ? path
      : path.includes("/")
      ? path.slice(0, path.lastIndexOf("/")) || "/"
      : ".";
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
        const relevant = isDir
          ? event.paths.some((p) => /\.ya?ml$/.test(p))
          : event.paths.some((p) => p.endsWith("/" + name) || p === name);
        if (!relevant) continue;
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
