import assert from "node:assert/strict";
import { DefinitionRegistry } from "../mcp/definition_registry.ts";
import { GatewayError } from "../support/errors.ts";
import { loadDefinitions, syncRegistry } from "./definition_dirs.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

async function withDir(files: Record<string, string>, fn: (dir: string) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "agent33-defs-" });
  try {
    for (const [name, text] of Object.entries(files)) {
      const path = `${dir}/${name}`;
      await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
      await Deno.writeTextFile(path, text);
    }
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function problems(kind: "agents" | "skills" | "workflows", dir: string): Promise<string[]> {
  try {
    await loadDefinitions(kind, dir);
  } catch (error) {
    assert.ok(error instanceof GatewayError);
    assert.equal(error.code, "config_invalid");
    return error.data?.problems as string[];
  }
  assert.fail("expected config_invalid");
}

Deno.test("the shipped agents, skills and workflows load", async () => {
  const agents = await loadDefinitions("agents", `${ROOT}agents`);
  assert.deepEqual(agents.map((a) => a.id), ["assistant"]);
  assert.equal(agents[0]?.prompt?.arguments[0]?.name, "task");
  const skills = await loadDefinitions("skills", `${ROOT}skills`);
  assert.deepEqual(skills.map((s) => s.id), ["summarize"]);
  assert.deepEqual(skills[0]?.prompt?.arguments.map((a) => [a.name, a.required]), [
    ["text", true],
    ["audience", false],
  ]);
  const workflows = await loadDefinitions("workflows", `${ROOT}workflows`);
  assert.deepEqual(workflows.map((w) => w.id), ["remember"]);
});

Deno.test("a missing definition directory is empty", async () => {
  assert.deepEqual(await loadDefinitions("agents", "/nonexistent/agents"), []);
});

Deno.test("agent problems are reported with file:line, unknown keys with a suggestion", async () => {
  await withDir({
    "a.yaml": "id: Bad Id\nname: A\ndescription: d\nsystem: s\nmax_step: 3\nmax_steps: 0\n",
  }, async (dir) => {
    const found = await problems("agents", dir);
    assert.ok(found.some((p) => p.startsWith(`${dir}/a.yaml:1: id must match`)), found.join("\n"));
    assert.ok(
      found.some((p) =>
        p.includes(`a.yaml:5: max_step is not a known field; did you mean "max_steps"`)
      ),
    );
    assert.ok(
      found.some((p) => p.includes("a.yaml:6: max_steps must be a whole number from 1 to 50")),
    );
  });
});

Deno.test("agent required fields are named with what to write", async () => {
  await withDir({ "a.yaml": "id: a\n" }, async (dir) => {
    const found = await problems("agents", dir);
    assert.ok(
      found.some((p) => /a\.yaml:1: system is required: the agent's system prompt/.test(p)),
    );
  });
});

Deno.test("a skill placeholder must be a declared argument (with the body's line)", async () => {
  await withDir({
    "s/SKILL.md":
      "---\nname: S\ndescription: d\narguments:\n  - name: text\n---\nSay {{text}}\nto {{whom}}\n",
  }, async (dir) => {
    const found = await problems("skills", dir);
    assert.deepEqual(found, [
      `${dir}/s/SKILL.md:8: the placeholder {{whom}} is not a declared argument; add it under arguments or fix the name`,
    ]);
  });
});

Deno.test("skill front matter errors carry the file's own line numbers", async () => {
  await withDir({
    "s/SKILL.md": "---\nname: S\ndescription: d\nargs: []\n---\nbody\n",
    "t/SKILL.md": "no front matter\n",
  }, async (dir) => {
    const found = await problems("skills", dir);
    assert.ok(
      found.some((p) => p.startsWith(`${dir}/s/SKILL.md:4: args is not a known field`)),
      found.join("\n"),
    );
    assert.ok(
      found.some((p) => p.startsWith(`${dir}/t/SKILL.md:1: must start with YAML front matter`)),
    );
  });
});

Deno.test("a workflow step may only read declared inputs and earlier steps", async () => {
  await withDir({
    "w.yaml": [
      "id: w",
      "name: W",
      "description: d",
      "inputs: { x: {} }",
      "steps:",
      "  - id: a",
      "    tool: t",
      "    arguments: { v: '{{steps.b.text}}', y: '{{inputs.y}}' }",
      "  - id: b",
      "    tool: t",
      "    on_error: ignore",
      "",
    ].join("\n"),
  }, async (dir) => {
    const found = await problems("workflows", dir);
    assert.ok(
      found.some((p) =>
        p.includes("w.yaml:6: steps[0] uses {{steps.b.text}}, but no earlier step")
      ),
      found.join("\n"),
    );
    assert.ok(
      found.some((p) =>
        p.includes('w.yaml:6: steps[0] uses {{inputs.y}}, but "y" is not a declared input')
      ),
    );
    assert.ok(
      found.some((p) => p.includes("w.yaml:11: steps[1].on_error must be stop or continue")),
    );
  });
});

Deno.test("duplicate ids across files are refused", async () => {
  const w = "id: w\nname: W\ndescription: d\nsteps: [{ id: a, tool: t }]\n";
  await withDir({ "a.yaml": w, "b.yaml": w }, async (dir) => {
    const found = await problems("workflows", dir);
    assert.ok(found.some((p) => p.includes(`b.yaml:1: repeats the id "w"`)), found.join("\n"));
  });
});

Deno.test("syncRegistry adds, replaces and removes, and notifies only on change", async () => {
  const registry = new DefinitionRegistry();
  let changes = 0;
  registry.onChange(() => changes++);
  const def = (id: string, description = "d") => ({ id, name: id, description, body: {} });
  syncRegistry(registry, [def("a"), def("b")]);
  assert.equal(changes, 2);
  syncRegistry(registry, [def("a"), def("b")]);
  assert.equal(changes, 2);
  syncRegistry(registry, [def("a", "new")]);
  assert.deepEqual(registry.list().map((d) => [d.id, d.description]), [["a", "new"]]);
  await Promise.resolve();
});
