/**
 * Watches a directory tree (skills' folders, the RAG corpus) and calls back, debounced.
 * core/file_watcher.ts watches one level and only YAML; skills live in `<id>/SKILL.md` and the
 * corpus in nested Markdown, so these need a recursive watch.
 * @module
 */
import type { Logger } from "../logger.ts";

/** Starts watching `dir` recursively; the returned function stops it. A missing dir is not watched. */
export function watchTree(
  dir: string,
  logger: Logger,
  onChange: () => Promise<void>,
  debounceMs = 200,
): () => void {
  let watcher: Deno.FsWatcher;
  try {
    watcher = Deno.watchFs(dir, { recursive: true });
  } catch (error) {
    logger.warn(`cannot watch ${dir} for changes; edits need a restart`, { error: String(error) });
    return () => {};
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running = Promise.resolve();
  const loop = (async () => {
    try {
      for await (const _ of watcher) {
        clearTimeout(timer);
        timer = setTimeout(() => {
          running = running.then(onChange).catch((error) =>
            logger.error(`reloading ${dir} failed`, { error: String(error) })
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
