import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { silentLogger } from "../support/logger.ts";
import { MemorySharedState } from "../bus/memory_shared_state.ts";
import { encodeJson } from "../bus/shared_state.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { type FleetServer, parseFleetConfig } from "../proxy/fleet_config.ts";
import { addServer, type FleetEdit, FleetEditError, removeServer } from "../proxy/fleet_writer.ts";
import type { PolicySet } from "../governance/policy.ts";
import { CONFIG_BUCKET, FLEET_KEY, POLICIES_KEY } from "./config_documents.ts";
import { SharedConfig } from "./shared_config.ts";

const DEFAULTS = { separator: "__", healthIntervalSeconds: 30 };

function fleetText(...ids: string[]): string {
  return "# the team's fleet\nproxy_servers:\n" +
    ids.map((id) => `  - id: ${id}\n    url: https://${id}.example.com/mcp\n`).join("");
}

/** One replica: a SharedConfig over the shared state, applying to a real fleet parser. */
class Replica {
  readonly config: SharedConfig;
  fleet: string[] = [];
  policies: PolicySet | undefined;
  applications = 0;
  events: GatewayEvent[] = [];

  constructor(state: MemorySharedState, id: string, paths: { fleet?: string; policies: string }) {
    this.config = new SharedConfig({
      state,
      replicaId: id,
      target: {
        checkFleet: (text, origin) => parseFleetConfig(text, origin, {}, DEFAULTS),
        applyFleet: (servers) => this.apply(servers),
        applyPolicies: (policies) => void (this.policies = policies),
      },
      bus: { publish: (event) => void this.events.push(event) },
      logger: silentLogger,
      clock: new ManualClock(1_000),
      ...(paths.fleet ? { fleetPath: paths.fleet } : {}),
      policyPath: paths.policies,
    });
  }

  /** Starts as the kernel does: the initial documents, then the watch. */
  async start(): Promise<void> {
    const fleet = await this.config.startFleet();
    if (fleet) {
      this.fleet = parseFleetConfig(fleet.text, fleet.origin, {}, DEFAULTS).servers.map((s) =>
        s.id
      );
    }
    this.policies = await this.config.startPolicies();
    await this.config.watch();
  }

  /** Applies a fleet as the kernel does, counting the applications. */
  apply(servers: readonly FleetServer[]) {
    const before = new Set(this.fleet);
    this.fleet = servers.map((s) => s.id);
    this.applications++;
    return Promise.resolve({
      added: this.fleet.filter((s) => !before.has(s)),
      removed: [...before].filter((s) => !this.fleet.includes(s)),
      changed: [],
    });
  }

  /** An edit as the admin API makes it. */
  edit(edit: FleetEdit, revision?: number) {
    return this.config.fleetStore.edit(edit, {
      validate: (text) => parseFleetConfig(text, "edit", {}, DEFAULTS),
      apply: (fleet) => this.apply(fleet.servers),
      ...(revision === undefined ? {} : { revision }),
    });
  }
}

/** Lets the watch deliveries and the application chain run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

async function files(fleet: string, policies: Record<string, string> = {}) {
  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(`${dir}/fleet.yaml`, fleet);
  await Deno.mkdir(`${dir}/policies`);
  for (const [name, text] of Object.entries(policies)) {
    await Deno.writeTextFile(`${dir}/policies/${name}`, text);
  }
  return {
    dir,
    paths: { fleet: `${dir}/fleet.yaml`, policies: `${dir}/policies` },
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

Deno.test("the first replica seeds the shared fleet from its file; the next adopts the bucket's, not its own", async () => {
  await using a = await files(fleetText("alpha"));
  await using b = await files(fleetText("other"));
  const state = new MemorySharedState();
  const first = new Replica(state, "a", a.paths);
  const second = new Replica(state, "b", b.paths);
  await first.start();
  await second.start();
  assert.deepEqual(first.fleet, ["alpha"]);
  assert.deepEqual(second.fleet, ["alpha"]);
  const stored = await (await state.bucket(CONFIG_BUCKET)).get(FLEET_KEY);
  assert.equal(second.config.fleetRevision, stored!.revision);
  assert.match(new TextDecoder().decode(stored!.value), /the team's fleet/, "stored as written");
  first.config.close();
  second.config.close();
});

Deno.test("an edit through one replica is applied by every replica, once each", async () => {
  await using a = await files(fleetText("alpha"));
  const state = new MemorySharedState();
  const replicas = ["a", "b", "c"].map((id) => new Replica(state, id, a.paths));
  for (const replica of replicas) await replica.start();
  const result = await replicas[0]!.edit(
    addServer({ id: "beta", url: "https://b.example.com/mcp" }),
  );
  await settle();
  assert.equal(result.changed, true);
  assert.deepEqual(result.applied, { added: ["beta"], removed: [], changed: [] });
  for (const replica of replicas) {
    assert.deepEqual(replica.fleet, ["alpha", "beta"]);
    assert.equal(replica.config.fleetRevision, result.revision);
    assert.equal(replica.applications, 1, "the writer's own watch does not apply it again");
  }
  for (const replica of replicas) replica.config.close();
});

Deno.test("an edit based on a stale revision is refused with revision_conflict and the current revision", async () => {
  await using a = await files(fleetText("alpha"));
  const state = new MemorySharedState();
  const [one, two] = [new Replica(state, "a", a.paths), new Replica(state, "b", a.paths)];
  await one.start();
  await two.start();
  const read = one.config.fleetStore.revision()!;
  const landed = await two.edit(addServer({ id: "beta", url: "https://b.example.com/mcp" }), read);
  const error = await one.edit(removeServer("alpha"), read).then(
    () => assert.fail("a stale edit was written"),
    (e) => e,
  );
  assert.ok(error instanceof FleetEditError);
  assert.equal(error.kind, "revision_conflict");
  assert.equal(error.revision, landed.revision);
  assert.match(error.message, new RegExp(`revision ${landed.revision}, not ${read}.*If-Match`));
  await settle();
  assert.deepEqual(one.fleet, ["alpha", "beta"], "the refused edit changed nothing");
  one.config.close();
  two.config.close();
});

Deno.test("edits without a revision from two replicas at once both land", async () => {
  await using a = await files(fleetText("alpha"));
  const state = new MemorySharedState();
  const [one, two] = [new Replica(state, "a", a.paths), new Replica(state, "b", a.paths)];
  await one.start();
  await two.start();
  await Promise.all([
    one.edit(addServer({ id: "beta", url: "https://b.example.com/mcp" })),
    two.edit(addServer({ id: "gamma", url: "https://g.example.com/mcp" })),
  ]);
  await settle();
  assert.deepEqual(one.fleet.toSorted(), ["alpha", "beta", "gamma"]);
  assert.deepEqual(two.fleet.toSorted(), ["alpha", "beta", "gamma"]);
  one.config.close();
  two.config.close();
});

Deno.test("a broken fleet document keeps the running fleet on every replica and is reported as fleet.reload_failed", async () => {
  await using a = await files(fleetText("alpha"));
  const state = new MemorySharedState();
  const [one, two] = [new Replica(state, "a", a.paths), new Replica(state, "b", a.paths)];
  await one.start();
  await two.start();
  const bucket = await state.bucket(CONFIG_BUCKET);
  const applied = one.config.fleetRevision;
  const broken = await bucket.put(
    FLEET_KEY,
    encodeJson({ text: "proxy_servers:\n  - id: Bad Id\n" }),
  );
  const notJson = await bucket.put(FLEET_KEY, new TextEncoder().encode("{"));
  await settle();
  for (const replica of [one, two]) {
    assert.deepEqual(replica.fleet, ["alpha"]);
    assert.equal(replica.config.fleetRevision, applied);
    const failed = replica.events.filter((e) => e.type === "fleet.reload_failed");
    assert.deepEqual(failed.map((e) => e.path), [
      `${CONFIG_BUCKET}/${FLEET_KEY}@${broken}`,
      `${CONFIG_BUCKET}/${FLEET_KEY}@${notJson}`,
    ]);
    assert.equal(replica.config.rejected.fleet?.revision, notJson);
  }
  await two.edit(addServer({ id: "beta", url: "https://b.example.com/mcp" })).then(
    () => assert.fail("an edit of an unreadable document"),
    (error) => assert.match(String(error), /not JSON; write a whole new one/),
  );
  const fixed = await bucket.put(FLEET_KEY, encodeJson({ text: fleetText("alpha", "beta") }));
  await settle();
  for (const replica of [one, two]) {
    assert.deepEqual(replica.fleet, ["alpha", "beta"]);
    assert.equal(replica.config.fleetRevision, fixed);
    assert.equal(replica.config.rejected.fleet, undefined);
  }
  one.config.close();
  two.config.close();
});

Deno.test("the policies are seeded once, and a new revision is put in force on every replica; a broken one is refused", async () => {
  const allowAcme = 'tenants:\n  acme:\n    allow: ["alpha__*"]\n';
  await using a = await files(fleetText("alpha"), { "10-acme.yaml": allowAcme });
  await using b = await files(fleetText("alpha"));
  const state = new MemorySharedState();
  const [one, two] = [new Replica(state, "a", a.paths), new Replica(state, "b", b.paths)];
  await one.start();
  await two.start();
  assert.deepEqual([...two.policies!.tenants.keys()], ["acme"], "adopted, not its empty directory");
  const bucket = await state.bucket(CONFIG_BUCKET);
  const next = await bucket.put(
    POLICIES_KEY,
    encodeJson({
      files: [{ name: "10-beta.yaml", text: 'tenants:\n  beta:\n    allow: ["*"]\n' }],
    }),
  );
  await settle();
  for (const replica of [one, two]) {
    assert.deepEqual([...replica.policies!.tenants.keys()], ["beta"]);
    assert.equal(replica.config.policyRevision, next);
  }
  const broken = await bucket.put(
    POLICIES_KEY,
    encodeJson({ files: [{ name: "x.yaml", text: "tenants:\n  beta:\n    allow: 7\n" }] }),
  );
  const badName = await bucket.put(
    POLICIES_KEY,
    encodeJson({ files: [{ name: "../etc/x.yaml", text: "tenants: {}\n" }] }),
  );
  await settle();
  for (const replica of [one, two]) {
    assert.deepEqual([...replica.policies!.tenants.keys()], ["beta"], "the policy in force stays");
    assert.deepEqual(
      replica.events.filter((e) => e.type === "policy.reload_failed").map((e) => e.path),
      [`${CONFIG_BUCKET}/${POLICIES_KEY}@${broken}`, `${CONFIG_BUCKET}/${POLICIES_KEY}@${badName}`],
    );
  }
  one.config.close();
  two.config.close();
});

Deno.test("a cluster with no fleet file starts empty, and the first edit creates the shared fleet", async () => {
  const state = new MemorySharedState();
  const dir = await Deno.makeTempDir();
  try {
    const [one, two] = [
      new Replica(state, "a", { policies: `${dir}/none` }),
      new Replica(state, "b", { policies: `${dir}/none` }),
    ];
    await one.start();
    await two.start();
    assert.deepEqual(one.fleet, []);
    const created = await one.edit(addServer({ id: "alpha", url: "https://a.example.com/mcp" }), 0);
    await settle();
    assert.deepEqual(two.fleet, ["alpha"]);
    assert.equal(two.config.fleetRevision, created.revision);
    one.config.close();
    two.config.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a fleet file that does not validate is never seeded, and fails only its own replica's start", async () => {
  await using a = await files("proxy_servers:\n  - id: Bad Id\n");
  const state = new MemorySharedState();
  const replica = new Replica(state, "a", a.paths);
  await assert.rejects(() => replica.config.startFleet(), /Bad Id/);
  assert.equal(await (await state.bucket(CONFIG_BUCKET)).get(FLEET_KEY), null);
  replica.config.close();
});

Deno.test("an edit after the shared fleet was deleted starts from the fleet that runs, not from nothing", async () => {
  await using a = await files(fleetText("alpha", "beta"));
  const state = new MemorySharedState();
  const [one, two] = [new Replica(state, "a", a.paths), new Replica(state, "b", a.paths)];
  await one.start();
  await two.start();
  await (await state.bucket(CONFIG_BUCKET)).delete(FLEET_KEY);
  await settle();
  assert.deepEqual(two.fleet, ["alpha", "beta"], "a deleted document keeps what runs");
  await one.edit(addServer({ id: "gamma", url: "https://g.example.com/mcp" }));
  await settle();
  assert.deepEqual(two.fleet, ["alpha", "beta", "gamma"]);
  one.config.close();
  two.config.close();
});

Deno.test("a replica without policy files seeds nothing, and adopts the policies a later replica seeds", async () => {
  await using bare = await files(fleetText("alpha"));
  await using full = await files(fleetText("alpha"), {
    "acme.yaml": 'tenants:\n  acme:\n    allow: ["alpha__*"]\n',
  });
  const state = new MemorySharedState();
  const first = new Replica(state, "a", bare.paths);
  await first.start();
  assert.equal(first.policies, undefined, "the built-in default, not shared");
  assert.equal(await (await state.bucket(CONFIG_BUCKET)).get(POLICIES_KEY), null);
  const second = new Replica(state, "b", full.paths);
  await second.start();
  await settle();
  assert.deepEqual([...first.policies!.tenants.keys()], ["acme"]);
  first.config.close();
  second.config.close();
});
