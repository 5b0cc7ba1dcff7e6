import assert from "node:assert/strict";
import { relative } from "node:path";
import { PLUGIN_KINDS } from "../plugin_api/mod.ts";
import {
  BUILTIN_PLUGIN_DIR,
  loadPlugins,
  pluginConfigSlice,
  type PluginFailure,
  type PluginLoadResult,
} from "./plugin_loader.ts";

/** Absolute URL of the plugin API, for fixture sources written outside the project. */
const API = new URL("../plugin_api/mod.ts", import.meta.url).href;

/** Source of a fixture `mod.ts` whose default export is the given object literal. */
function manifest(fields: string): string {
  return `import { definePlugin } from ${JSON.stringify(API)};
export default definePlugin({ ${fields} } as never);
`;
}

/** A valid "model" plugin's manifest fields, with `extra` appended (later keys win). */
function model(name: string, extra = ""): string {
  return manifest(
    `name: ${JSON.stringify(name)}, version: "1.0.0", kind: "model", permissions: {}, ` +
      `create() { return {}; }, ${extra}`,
  );
}

/** Writes `files` (relative path → source) under a fresh temp dir, runs `fn`, then removes it. */
async function withDir(
  files: Record<string, string>,
  fn: (dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "plugin_loader_test_" });
  try {
    for (const [rel, source] of Object.entries(files)) {
      const path = `${dir}/${rel}`;
      await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
      await Deno.writeTextFile(path, source);
    }
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Loads one fixture plugin that must fail, and returns its only failure. */
async function loadFailing(source: string): Promise<{ failure: PluginFailure; path: string }> {
  let result: { failure: PluginFailure; path: string } | undefined;
  await withDir({ "p/mod.ts": source }, async (dir) => {
    const { plugins, failures } = await loadPlugins([dir]);
    assert.deepEqual(plugins, []);
    assert.equal(failures.length, 1);
    result = { failure: failures[0]!, path: `${dir}/p/mod.ts` };
  });
  return result!;
}

async function assertInvalidManifest(source: string, ...fragments: string[]): Promise<void> {
  const { failure, path } = await loadFailing(source);
  assert.equal(failure.path, path);
  assert.match(failure.reason, /^invalid manifest: /);
  for (const fragment of fragments) {
    assert.ok(
      failure.reason.includes(fragment),
      `expected "${fragment}" in reason: ${failure.reason}`,
    );
  }
}

function names(result: PluginLoadResult): string[] {
  return result.plugins.map((p) => p.manifest.name);
}

Deno.test("loadPlugins loads a good plugin with its manifest intact and its mod.ts path", async () => {
  await withDir({
    "good/mod.ts": manifest(`
      name: "good-one",
      version: "1.2.3-beta.1",
      kind: "model",
      description: "a fixture",
      permissions: { net: ["127.0.0.1"], env: true },
      create() { return { hello: "world" }; },
    `),
  }, async (dir) => {
    const { plugins, failures } = await loadPlugins([dir]);
    assert.deepEqual(failures, []);
    assert.equal(plugins.length, 1);
    const [plugin] = plugins;
    assert.equal(plugin!.path, `${dir}/good/mod.ts`);
    const { create, ...fields } = plugin!.manifest;
    assert.deepEqual(fields, {
      name: "good-one",
      version: "1.2.3-beta.1",
      kind: "model",
      description: "a fixture",
      permissions: { net: ["127.0.0.1"], env: true },
    });
    assert.equal(typeof create, "function");
  });
});

Deno.test("loadPlugins accepts a directory given with a trailing slash", async () => {
  await withDir({ "a/mod.ts": model("a") }, async (dir) => {
    const { plugins, failures } = await loadPlugins([`${dir}/`]);
    assert.deepEqual(failures, []);
    assert.equal(plugins[0]?.path, `${dir}/a/mod.ts`);
  });
});

Deno.test("loadPlugins loads from a directory whose path has a space, # and %", async () => {
  await withDir({ "my plugins #1 100%/odd/mod.ts": model("odd") }, async (dir) => {
    const result = await loadPlugins([`${dir}/my plugins #1 100%`]);
    assert.deepEqual(result.failures, []);
    assert.deepEqual(names(result), ["odd"]);
  });
});

Deno.test("loadPlugins resolves a relative directory against the working directory", async () => {
  await withDir({ "rel/mod.ts": model("rel") }, async (dir) => {
    const result = await loadPlugins([relative(Deno.cwd(), dir)]);
    assert.deepEqual(result.failures, []);
    assert.deepEqual(names(result), ["rel"]);
  });
});

Deno.test("loadPlugins skips a plugin with a syntax error and names its path", async () => {
  await withDir({
    "a-good/mod.ts": model("a-good"),
    "broken/mod.ts": "export default {{{ this is not typescript",
    "z-good/mod.ts": model("z-good"),
  }, async (dir) => {
    const result = await loadPlugins([dir]);
    assert.deepEqual(names(result), ["a-good", "z-good"]);
    assert.equal(result.failures.length, 1);
    assert.equal(result.failures[0]!.path, `${dir}/broken/mod.ts`);
    assert.match(result.failures[0]!.reason, /^cannot import: /);
  });
});

Deno.test("loadPlugins skips a plugin whose module throws while importing", async () => {
  const { failure, path } = await loadFailing('throw new Error("boom at import");\n');
  assert.equal(failure.path, path);
  assert.match(failure.reason, /^cannot import: .*boom at import/);
});

Deno.test("loadPlugins skips a plugin without a default export and says so", async () => {
  const { failure, path } = await loadFailing("export const manifest = {};\n");
  assert.equal(failure.path, path);
  assert.match(failure.reason, /no default export/);
  assert.match(failure.reason, /export default definePlugin/);
});

Deno.test("loadPlugins rejects a default export that is not an object", async () => {
  await assertInvalidManifest("export default 42;\n", "manifest");
});

Deno.test("loadPlugins rejects a manifest with a bad name and names the field", async () => {
  await assertInvalidManifest(model("Bad_Name"), "name ", "lower-case");
});

Deno.test("loadPlugins rejects a manifest with a bad version and names the field", async () => {
  await assertInvalidManifest(model("p", 'version: "1.0"'), "version ", "semver");
});

Deno.test("loadPlugins rejects an unknown kind and lists the kinds", async () => {
  await assertInvalidManifest(
    model("p", 'kind: "widget"'),
    "kind ",
    `must be one of ${PLUGIN_KINDS.join(", ")}`,
  );
});

Deno.test("loadPlugins rejects a manifest without create and names the field", async () => {
  await assertInvalidManifest(model("p", "create: undefined"), "create ", "must be a function");
});

Deno.test("loadPlugins rejects permissions that are not an object and names the field", async () => {
  await assertInvalidManifest(model("p", 'permissions: "all"'), "permissions ");
});

Deno.test("loadPlugins rejects an unknown permission key and names the field", async () => {
  await assertInvalidManifest(
    model("p", "permissions: { ffi: true }"),
    `permissions has unknown key "ffi"`,
  );
});

Deno.test("loadPlugins rejects a permission grant of the wrong type and names it", async () => {
  await assertInvalidManifest(model("p", 'permissions: { net: "yes" }'), "permissions.net ");
});

Deno.test("loadPlugins rejects a transport plugin without transport and names the field", async () => {
  await assertInvalidManifest(
    model("p", 'kind: "transport"'),
    "transport ",
    "is required for a transport plugin",
  );
});

Deno.test("loadPlugins reports every problem of one manifest together", async () => {
  await assertInvalidManifest(
    manifest('name: "X", version: "x", kind: "model", permissions: {}'),
    "name ",
    "version ",
    "create ",
  );
});

Deno.test("loadPlugins skips a duplicate name in a later directory and names the first path", async () => {
  await withDir({
    "one/same/mod.ts": model("same"),
    "two/other-folder/mod.ts": model("same"),
    "two/unique/mod.ts": model("unique"),
  }, async (root) => {
    const result = await loadPlugins([`${root}/one`, `${root}/two`]);
    assert.deepEqual(names(result), ["same", "unique"]);
    assert.equal(result.plugins[0]!.path, `${root}/one/same/mod.ts`);
    assert.equal(result.failures.length, 1);
    const [failure] = result.failures;
    assert.equal(failure!.path, `${root}/two/other-folder/mod.ts`);
    assert.match(failure!.reason, /"same" is already used by/);
    assert.ok(failure!.reason.includes(`${root}/one/same/mod.ts`), failure!.reason);
  });
});

Deno.test("loadPlugins silently ignores folders without mod.ts and _ or . folders", async () => {
  await withDir({
    "helpers/util.ts": "export const x = 1;\n",
    "_shared/mod.ts": "this would not parse {{{",
    ".hidden/mod.ts": "this would not parse {{{",
    "README.md": "not a plugin\n",
    "mod.ts": "this would not parse {{{",
    "real/mod.ts": model("real"),
  }, async (dir) => {
    const result = await loadPlugins([dir]);
    assert.deepEqual(result.failures, []);
    assert.deepEqual(names(result), ["real"]);
  });
});

Deno.test("loadPlugins loads plugin folders in name order", async () => {
  await withDir({
    "c/mod.ts": model("c"),
    "a/mod.ts": model("a"),
    "b/mod.ts": model("b"),
  }, async (dir) => {
    assert.deepEqual(names(await loadPlugins([dir])), ["a", "b", "c"]);
  });
});

Deno.test("loadPlugins reports a missing directory and says to fix MCP_PLUGIN_PATHS", async () => {
  await withDir({ "a/mod.ts": model("a") }, async (dir) => {
    const missing = `${dir}/does-not-exist`;
    const result = await loadPlugins([missing, dir]);
    assert.deepEqual(result.failures, [{
      path: missing,
      reason: "plugin directory does not exist; fix MCP_PLUGIN_PATHS",
    }]);
    assert.deepEqual(names(result), ["a"]);
  });
});

Deno.test("loadPlugins reports a plugin path that is a file, not a directory", async () => {
  await withDir({ "file.txt": "x" }, async (dir) => {
    const result = await loadPlugins([`${dir}/file.txt`]);
    assert.deepEqual(result.plugins, []);
    assert.equal(result.failures.length, 1);
    assert.equal(result.failures[0]!.path, `${dir}/file.txt`);
    assert.match(result.failures[0]!.reason, /^cannot read plugin directory: /);
  });
});

Deno.test("loadPlugins loads the built-in plugins with no failures, including three transports", async () => {
  const { plugins, failures } = await loadPlugins([BUILTIN_PLUGIN_DIR]);
  assert.deepEqual(failures, []);
  const transports = plugins.flatMap((p) =>
    p.manifest.kind === "transport" ? [p.manifest.transport] : []
  );
  for (const id of ["stdio", "streamable-http", "sse"]) {
    assert.ok(transports.includes(id), `missing built-in transport "${id}": ${transports}`);
  }
  for (const plugin of plugins) {
    assert.ok(plugin.path.startsWith(BUILTIN_PLUGIN_DIR), plugin.path);
    assert.ok(plugin.path.endsWith("/mod.ts"), plugin.path);
  }
});

Deno.test("pluginConfigSlice keeps only the plugin's variables, keyed by lower-case key", () => {
  assert.deepEqual(
    pluginConfigSlice("bus-nats", { MCP_PLUGIN_BUS_NATS_URL: "x", MCP_PLUGIN_OTHER_Y: "z" }),
    { url: "x" },
  );
});

Deno.test("pluginConfigSlice keeps underscores inside a multi-word key", () => {
  assert.deepEqual(
    pluginConfigSlice("bus-nats", { MCP_PLUGIN_BUS_NATS_MAX_RETRIES: "3" }),
    { max_retries: "3" },
  );
});
