import assert from "node:assert/strict";
import {
  addServer,
  editFleetFile,
  FleetEditError,
  removeServer,
  setServerEnabled,
  withFleetLock,
} from "./fleet_writer.ts";
import { type FleetConfig, parseFleetConfig } from "./fleet_config.ts";

const DEFAULTS = { separator: "__", healthIntervalSeconds: 30 };
const FLEET = `# Our upstreams: keep this comment
proxy_servers:
  - id: alpha # the first one
    command: ["deno", "run", "alpha.ts", "--a-rather-long-argument-that-must-not-be-folded-by-the-writer"]
    tools: { allow: ["read_*"] } # only readers

  # beta is off for now
  - id: beta
    url: https://beta.example.com/mcp
    headers:
      Authorization: Bearer \${BETA_TOKEN}
    enabled: false # until the token exists
`;

async function withFile(text: string, fn: (path: string, dir: string) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "agent33-fleet-writer-" });
  const path = `${dir}/fleet.yaml`;
  await Deno.writeTextFile(path, text);
  try {
    await fn(path, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const validate = (path: string) => (text: string): FleetConfig =>
  parseFleetConfig(text, path, {}, DEFAULTS);

Deno.test("Adding a server keeps every comment and the untouched entries as written", async () => {
  await withFile(FLEET, async (path) => {
    const result = await editFleetFile(
      path,
      addServer({ id: "gamma", command: ["deno", "run", "gamma.ts"], env: { MODE: "fast" } }),
      { validate: validate(path) },
    );
    assert.equal(result.changed, true);
    assert.deepEqual(result.validated.servers.map((s) => s.id), ["alpha", "beta", "gamma"]);
    const text = await Deno.readTextFile(path);
    assert.ok(text.startsWith(FLEET), `the old text is kept verbatim:\n${text}`);
    assert.match(text, /- id: gamma\n {4}command: \["deno", "run", "gamma.ts"\]\n/);
  });
});

Deno.test("Removing a server keeps the comments of the others", async () => {
  await withFile(FLEET, async (path) => {
    await editFleetFile(path, removeServer("alpha"), { validate: validate(path) });
    const text = await Deno.readTextFile(path);
    assert.ok(!text.includes("alpha"));
    assert.match(text, /# Our upstreams: keep this comment/);
    assert.match(text, /enabled: false # until the token exists/);
    assert.equal(text, FLEET.replace(/ {2}- id: alpha[^]*?# only readers\n/, ""));
  });
});

Deno.test("Removing a server takes the comment lines written just above it", async () => {
  await withFile(FLEET, async (path) => {
    await editFleetFile(path, removeServer("beta"), { validate: validate(path) });
    assert.equal(await Deno.readTextFile(path), FLEET.slice(0, FLEET.indexOf("\n\n  # beta") + 1));
  });
});

Deno.test("Disabling a server without an enabled key adds one line under it", async () => {
  await withFile(FLEET, async (path) => {
    await editFleetFile(path, setServerEnabled("alpha", false), { validate: validate(path) });
    assert.equal(
      await Deno.readTextFile(path),
      FLEET.replace("# only readers\n", "# only readers\n    enabled: false\n"),
    );
  });
});

Deno.test("Enabling a server changes only its enabled line; enabling an enabled one writes nothing", async () => {
  await withFile(FLEET, async (path) => {
    const env = { BETA_TOKEN: "t" };
    const check = (text: string) => parseFleetConfig(text, path, env, DEFAULTS);
    const on = await editFleetFile(path, setServerEnabled("beta", true), { validate: check });
    assert.equal(on.changed, true);
    assert.equal(
      await Deno.readTextFile(path),
      FLEET.replace("enabled: false # until", "enabled: true # until"),
    );
    const again = await editFleetFile(path, setServerEnabled("alpha", true), { validate: check });
    assert.equal(again.changed, false);
  });
});

Deno.test("An edit that would make the file invalid is refused with every problem and writes nothing", async () => {
  await withFile(FLEET, async (path, dir) => {
    const error = await editFleetFile(
      path,
      addServer({ id: "Bad Id", transport: "carrier-pigeon" }),
      { validate: validate(path) },
    ).catch((e) => e);
    assert.ok(error instanceof FleetEditError);
    assert.equal(error.kind, "invalid");
    assert.ok(error.problems.length >= 2, error.message);
    assert.match(error.message, /fleet\.yaml:\d+: /);
    assert.equal(await Deno.readTextFile(path), FLEET);
    const names = [];
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
    assert.deepEqual(names, ["fleet.yaml"], "no backup and no temp file for a refused edit");
  });
});

Deno.test("A write keeps the previous text as <file>.bak and leaves no temp file", async () => {
  await withFile(FLEET, async (path, dir) => {
    await editFleetFile(path, removeServer("beta"), { validate: validate(path) });
    assert.equal(await Deno.readTextFile(`${path}.bak`), FLEET);
    const names = [];
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
    assert.deepEqual(names.sort(), ["fleet.yaml", "fleet.yaml.bak"]);
  });
});

Deno.test("A duplicate id is a conflict and an unknown id is not found, naming the id", async () => {
  await withFile(FLEET, async (path) => {
    const dup = await editFleetFile(path, addServer({ id: "alpha", url: "https://x.example" }), {
      validate: validate(path),
    }).catch((e) => e);
    assert.ok(dup instanceof FleetEditError);
    assert.equal(dup.kind, "conflict");
    assert.match(dup.message, /"alpha"/);
    const missing = await editFleetFile(path, removeServer("zeta"), { validate: validate(path) })
      .catch((e) => e);
    assert.ok(missing instanceof FleetEditError);
    assert.equal(missing.kind, "not_found");
    assert.match(missing.message, /"zeta"/);
    assert.equal(await Deno.readTextFile(path), FLEET);
  });
});

Deno.test("Concurrent edits of one file are serialized: every add lands", async () => {
  await withFile(FLEET, async (path) => {
    const ids = Array.from({ length: 8 }, (_, i) => `s${i}`);
    await Promise.all(
      ids.map((id) =>
        editFleetFile(path, addServer({ id, url: `https://${id}.example.com/mcp` }), {
          validate: validate(path),
        })
      ),
    );
    const fleet = parseFleetConfig(await Deno.readTextFile(path), path, {}, DEFAULTS);
    assert.deepEqual(fleet.servers.map((s) => s.id).sort(), ["alpha", "beta", ...ids].sort());
  });
});

Deno.test("The apply step runs inside the lock, in edit order", async () => {
  await withFile(FLEET, async (path) => {
    const applied: string[][] = [];
    await Promise.all(
      ["x1", "x2", "x3"].map((id) =>
        editFleetFile(path, addServer({ id, url: `https://${id}.example.com/mcp` }), {
          validate: validate(path),
          apply: async (fleet) => {
            await Promise.resolve();
            applied.push(fleet.servers.map((s) => s.id));
          },
        })
      ),
    );
    // Each application sees every earlier edit: no stale fleet is ever applied after a newer one.
    assert.deepEqual(applied.map((ids) => ids.length), [3, 4, 5]);
  });
});

Deno.test("An empty fleet file gets a proxy_servers list on the first add", async () => {
  await withFile("# nothing yet\n", async (path) => {
    await editFleetFile(path, addServer({ id: "one", url: "https://one.example.com/mcp" }), {
      validate: validate(path),
    });
    const fleet = parseFleetConfig(await Deno.readTextFile(path), path, {}, DEFAULTS);
    assert.deepEqual(fleet.servers.map((s) => s.id), ["one"]);
  });
});

Deno.test("withFleetLock runs holders of one path one at a time, even after a failure", async () => {
  const order: string[] = [];
  const first = withFleetLock("/lock/test", async () => {
    order.push("a-start");
    await Promise.resolve();
    order.push("a-end");
    throw new Error("a failed");
  });
  const second = withFleetLock("/lock/test", () => {
    order.push("b");
    return Promise.resolve();
  });
  await assert.rejects(first, /a failed/);
  await second;
  assert.deepEqual(order, ["a-start", "a-end", "b"]);
});
