/**
 * The docs cannot drift from the code: every shell block marked ```` ```sh runnable ```` in
 * README.md and docs/*.md runs here, in the repository, as a reader would paste it (`deno task`
 * resolves to this test's Deno), and must exit 0 without changing the checkout (git status is the
 * same before and after, deno.lock aside). A runnable block reaches nothing beyond loopback: upstreams come from the
 * Deno cache, as in every other test.
 */
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const OPEN = /^```sh runnable\s*$/;
const CLOSE = /^```\s*$/;

/** One runnable block: where it is and what it says. */
interface Block {
  where: string;
  script: string;
}

/** Every runnable block of README.md and docs/*.md, in file order. */
function runnableBlocks(): Block[] {
  const files = ["README.md"];
  for (const entry of Deno.readDirSync(join(ROOT, "docs"))) {
    if (entry.isFile && entry.name.endsWith(".md")) files.push(`docs/${entry.name}`);
  }
  const blocks: Block[] = [];
  for (const file of files.sort()) {
    const lines = Deno.readTextFileSync(join(ROOT, file)).split("\n");
    for (let i = 0; i < lines.length; i++) {
      if (!OPEN.test(lines[i]!)) continue;
      const start = i + 1;
      let end = start;
      while (end < lines.length && !CLOSE.test(lines[end]!)) end++;
      assert.ok(end < lines.length, `${file}:${start}: a runnable block is never closed`);
      blocks.push({ where: `${file}:${start}`, script: lines.slice(start, end).join("\n") });
      i = end;
    }
  }
  return blocks;
}

async function gitStatus(): Promise<string> {
  const out = await new Deno.Command("git", {
    args: ["status", "--porcelain", "--untracked-files=all"],
    cwd: ROOT,
    stdout: "piped",
    stderr: "null",
  }).output();
  // deno.lock is Deno's to update (any run that resolves a new dependency does, in parallel tests
  // too); a block is judged by what else it leaves behind.
  return new TextDecoder().decode(out.stdout).split("\n")
    .filter((line) => !line.endsWith(" deno.lock")).join("\n");
}

Deno.test("Every runnable shell block in README.md and docs/ runs and exits 0", async (t) => {
  const blocks = runnableBlocks();
  assert.ok(blocks.length >= 3, `runnable blocks found: ${blocks.map((b) => b.where)}`);
  for (const block of blocks) {
    await t.step(block.where, async () => {
      const before = await gitStatus();
      const run = await new Deno.Command("sh", {
        args: ["-euc", block.script],
        cwd: ROOT,
        env: {
          NO_COLOR: "1",
          PATH: `${dirname(Deno.execPath())}:${Deno.env.get("PATH") ?? ""}`,
        },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes).slice(-3000);
      assert.equal(
        run.code,
        0,
        `${block.where} exited ${run.code}:\n${block.script}\n--- stdout\n${
          decode(run.stdout)
        }\n--- stderr\n${decode(run.stderr)}`,
      );
      assert.equal(await gitStatus(), before, `${block.where} changed the checkout`);
    });
  }
});
