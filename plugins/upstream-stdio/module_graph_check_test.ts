import assert from "node:assert/strict";
import { systemClock } from "../../core/plugin_api/mod.ts";
import type { UpstreamServerSpec } from "../../core/plugin_api/mod.ts";
import { testBaseEnv } from "../../tests/fixtures/upstreams/support.ts";
import { planStdio } from "./command_plan.ts";
import { checkModuleGraph, denoEntry } from "./module_graph_check.ts";

function spec(command: string[], read: string[] = []): UpstreamServerSpec {
  return {
    id: "graph",
    transport: "stdio",
    command,
    headers: {},
    env: {},
    permissions: read.length ? { read } : {},
    sandbox: "deno",
  };
}

/** Plans the server as the gateway does and runs the check on that plan. */
function check(
  server: UpstreamServerSpec,
  timeoutMs?: number,
  env: Record<string, string> = {},
): Promise<void> {
  const baseEnv = { ...testBaseEnv(), ...env };
  const plan = planStdio(server, { maxMessageBytes: 1 << 20, baseEnv });
  return checkModuleGraph(server, plan, systemClock, timeoutMs);
}

/** A temp dir with `app/main.ts` importing `import` as text, `app/own.txt` and `secret/key.txt`. */
async function project(importPath: (dir: string) => string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "graph-check-" });
  await Deno.mkdir(`${dir}/app`);
  await Deno.mkdir(`${dir}/secret`);
  await Deno.writeTextFile(`${dir}/app/own.txt`, "own");
  await Deno.writeTextFile(`${dir}/secret/key.txt`, "s3cr3t");
  await Deno.writeTextFile(
    `${dir}/app/main.ts`,
    `import t from ${JSON.stringify(importPath(dir))} with { type: "text" };\nconsole.log(t);\n`,
  );
  return dir;
}

Deno.test("denoEntry finds the module, the resolution flags, the config and the read grants of a planned argv", () => {
  const plan = planStdio(
    spec(["deno", "run", "--config", "/p/deno.json", "--lock=x.lock", "main.ts", "--x"], ["/data"]),
    { maxMessageBytes: 1, baseEnv: { HOME: "/home/u" } },
    "/bin/deno",
  );
  const entry = denoEntry(plan.start.command!)!;
  assert.equal(entry.module, "main.ts");
  assert.equal(entry.config, "/p/deno.json");
  assert.deepEqual(entry.reads, ["/data", "/home/u/.cache/deno/npm"]);
  assert.equal(entry.readAll, false);
  assert.ok(entry.flags.includes("--config=/p/deno.json"));
  assert.ok(entry.flags.some((f) => f.startsWith("--deny-import=")));
  assert.equal(entry.flags.some((f) => f.startsWith("--allow-") || f.startsWith("--lock")), false);
  assert.equal(denoEntry(["/bin/node", "server.js"]), undefined);
  const preloaded = denoEntry(["deno", "run", "--preload", "a.ts", "--require=b.cjs", "main.ts"])!;
  assert.deepEqual(preloaded.preloads, ["a.ts", "b.cjs"]);
  assert.equal(preloaded.module, "main.ts");
});

Deno.test("A text import inside the entry's directory passes; one outside is refused, unless read grants it", async () => {
  const inside = await project(() => "./own.txt");
  const outside = await project((dir) => `${dir}/secret/key.txt`);
  try {
    await check(spec(["deno", "run", `${inside}/app/main.ts`]));
    await assert.rejects(
      check(spec(["deno", "run", `${outside}/app/main.ts`])),
      (e: Error & { code?: string }) =>
        e.code === "config_invalid" && e.message.includes(`${outside}/secret/key.txt`) &&
        /permissions\.read/.test(e.message) && !e.message.includes("s3cr3t"),
    );
    await check(spec(["deno", "run", `${outside}/app/main.ts`], [`${outside}/secret`]));
  } finally {
    await Deno.remove(inside, { recursive: true });
    await Deno.remove(outside, { recursive: true });
  }
});

Deno.test("The check refuses when it cannot list the graph in time, and leaves npm entries to Deno's own check", async () => {
  const dir = await project(() => "./own.txt");
  try {
    await assert.rejects(
      check(spec(["deno", "run", `${dir}/app/main.ts`]), 1),
      /could not list the module graph .* \(timed out after 1 ms\)/,
    );
    // No deno info is run (it would fetch the package): Deno checks a package's file imports itself.
    await check(spec(["npx", "-y", "@example/not-fetched"]));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("A module run before the entry (--preload, --require) is checked as the entry is", async () => {
  const dir = await project(() => "./own.txt");
  try {
    await Deno.mkdir(`${dir}/pre`);
    await Deno.writeTextFile(
      `${dir}/pre/steal.ts`,
      `import t from "../secret/key.txt" with { type: "text" };\nconsole.error(t);\n`,
    );
    for (const flag of ["--preload", "--require"]) {
      await assert.rejects(
        check(spec(["deno", "run", flag, `${dir}/pre/steal.ts`, `${dir}/app/main.ts`])),
        (e: Error & { code?: string }) =>
          e.code === "config_invalid" && e.message.includes(`module ${dir}/pre/steal.ts`) &&
          e.message.includes(`${dir}/secret/key.txt`) && !e.message.includes("s3cr3t"),
      );
    }
    // Its own directory is its project too, as the entry's is.
    await check(spec(["deno", "run", "--preload", `${dir}/app/main.ts`, `${dir}/app/main.ts`]));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("An entry lying directly in the home or the temp directory may import only itself and what is granted", async () => {
  const home = await Deno.makeTempDir({ prefix: "graph-home-" });
  try {
    await Deno.mkdir(`${home}/.ssh`);
    await Deno.writeTextFile(`${home}/.ssh/id_rsa`, "s3cr3t");
    const main = `import t from "./.ssh/id_rsa" with { type: "text" };\nconsole.log(t);\n`;
    await Deno.writeTextFile(`${home}/server.ts`, main);
    for (const env of [{ HOME: home }, { TMPDIR: home }] as Record<string, string>[]) {
      await assert.rejects(
        check(spec(["deno", "run", `${home}/server.ts`]), undefined, env),
        (e: Error) =>
          e.message.includes(`imports ${home}/.ssh/id_rsa`) &&
          e.message.includes(`its directory, ${home}, holds far more than one server's project`) &&
          /move the server into a directory of its own/.test(e.message) &&
          !e.message.includes("s3cr3t"),
      );
    }
    await check(spec(["deno", "run", `${home}/server.ts`], [`${home}/.ssh/id_rsa`]), undefined, {
      HOME: home,
    });
    // A directory of its own under the home directory is its project, as anywhere else.
    await Deno.mkdir(`${home}/project/.ssh`, { recursive: true });
    await Deno.writeTextFile(`${home}/project/.ssh/id_rsa`, "own");
    await Deno.writeTextFile(`${home}/project/server.ts`, main);
    await check(spec(["deno", "run", `${home}/project/server.ts`]), undefined, { HOME: home });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
