import assert from "node:assert/strict";
import { ManualClock } from "./clock.ts";
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

Deno.test("watchFile reloads a burst of changes once, when the debounce has passed on its clock", async () => {
  const dir = await Deno.makeTempDir();
  const clock = new ManualClock();
  let changes = 0;
  const stop = watchFile({
    path: `${dir}/fleet.yaml`,
    logger: silentLogger,
    debounceMs: 200,
    clock,
    onChange: () => Promise.resolve(void changes++),
  });
  try {
    await Deno.writeTextFile(`${dir}/fleet.yaml`, "servers: []\n");
    await Deno.writeTextFile(`${dir}/fleet.yaml`, "servers: [] # again\n");
    await until(() => clock.pendingTimers === 1, "the debounce timer");
    // Every event of the burst has arrived by now; the clock has not moved, so none reloaded.
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(changes, 0);
    assert.equal(clock.pendingTimers, 1, "each event restarted the one timer");
    clock.advance(200);
    await until(() => changes > 0, "the reload");
    assert.equal(changes, 1);
  } finally {
    stop();
    await Deno.remove(dir, { recursive: true });
  }
  assert.equal(clock.pendingTimers, 0);
});
