import assert from "node:assert/strict";
import { watchFile } from "./file_watcher.ts";
import { silentLogger } from "./logger.ts";

/** Waits (bounded) for a real file-system event to arrive. */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

Deno.test("watchFile with recursive sees a change in a nested folder, whatever the file type", async () => {
  const dir = await Deno.makeTempDir();
  await Deno.mkdir(`${dir}/summarize`);
  let changes = 0;
  const stop = watchFile({
    path: dir,
    logger: silentLogger,
    recursive: true,
    debounceMs: 10,
    onChange: () => Promise.resolve(void changes++),
  });
  try {
    await Deno.writeTextFile(`${dir}/summarize/SKILL.md`, "---\nname: x\n---\n");
    await until(() => changes > 0, "the nested change");
  } finally {
    stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("watchFile on a directory, not recursive, reloads for YAML files only", async () => {
  const dir = await Deno.makeTempDir();
  let changes = 0;
  const stop = watchFile({
    path: dir,
    logger: silentLogger,
    debounceMs: 10,
    onChange: () => Promise.resolve(void changes++),
  });
  try {
    await Deno.writeTextFile(`${dir}/notes.txt`, "ignored");
    // A real file-system event needs a moment to arrive; none may come for a .txt file.
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(changes, 0);
    await Deno.writeTextFile(`${dir}/policy.yaml`, "tenants: {}\n");
    await until(() => changes > 0, "the YAML change");
  } finally {
    stop();
    await Deno.remove(dir, { recursive: true });
  }
});
