/**
 * Watches a configuration file (the fleet), a directory of YAML files (the policies) or a whole
 * tree (skills' folders, the RAG corpus) and calls back, debounced and one reload at a time, when
 * it changes. Reload logic stays with the caller: an invalid new file keeps what runs.
 * @module
 */
import { type Clock, systemClock, type TimerHandle } from "./clock.ts";
import type { Logger } from "./logger.ts";

/** Options for {@link watchFile}. */
export interface WatchFileOptions {
  path: string;
  logger: Logger;
  /** Editors write in bursts; changes within this window reload once. */
  debounceMs?: number;
  onChange: () => Promise<void>;
  /** Watch `path` as a directory tree: every change below it counts, not only YAML. */
  recursive?: boolean;
  /** Times the debounce; the real clock by default (file events arrive in real time). */
  clock?: Clock;
}

/** Starts watching; the returned function stops it. */
export function watchFile(options: WatchFileOptions): () => void {
  const { path, logger, debounceMs = 200, onChange, recursive = false } = options;
  const clock = options.clock ?? systemClock;
  let watcher: Deno.FsWatcher;
  let isDir = recursive;
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
    watcher = Deno.watchFs(dir, { recursive });
  } catch (error) {
    logger.warn(`cannot watch ${path} for changes; edits need a restart`, { error: String(error) });
    return () => {};
  }
  const name = path.slice(path.lastIndexOf("/") + 1);
  let timer: TimerHandle | undefined;
  let running = Promise.resolve();
  const loop = (async () => {
    try {
      for await (const event of watcher) {
        const relevant = recursive ||
          (isDir
            ? event.paths.some((p) => /\.ya?ml$/.test(p))
            : event.paths.some((p) => p.endsWith("/" + name) || p === name));
        if (!relevant) continue;
        timer?.cancel();
        timer = clock.setTimeout(() => {
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
    timer?.cancel();
    watcher.close();
    void loop;
  };
}
