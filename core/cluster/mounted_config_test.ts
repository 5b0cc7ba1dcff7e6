import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { silentLogger } from "../support/logger.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { parseFleetConfig } from "../proxy/fleet_config.ts";
import { addServer, FleetEditError } from "../proxy/fleet_writer.ts";
import { fleetEditRefusal } from "../operator/admin_server_routes.ts";
import type { PolicySet } from "../governance/policy.ts";
import { MountedConfig } from "./mounted_config.ts";

const DEFAULTS = { separator: "__", healthIntervalSeconds: 30 };

function fleetText(...ids: string[]): string {
  return "proxy_servers:\n" +
    ids.map((id) => `  - id: ${id}\n    url: https://${id}.example.com/mcp\n`).join("");
}

/** One replica reading the mounted files in `dir`. */
function replica(dir: string) {
  const state = { fleet: [] as string[], policies: undefined as PolicySet | undefined };
  const events: GatewayEvent[] = [];
  const config = new MountedConfig({
    target: {
      checkFleet: (text, origin) => parseFleetConfig(text, origin, {}, DEFAULTS),
      applyFleet: (servers) => {
        state.fleet = servers.map((s) => s.id);
        return Promise.resolve({ added: [], removed: [], changed: [] });
      },
      applyPolicies: (policies) => void (state.policies = policies),
    },
    bus: { publish: (event) => void events.push(event) },
    logger: silentLogger,
    clock: new ManualClock(),
    fleetPath: `${dir}/fleet.yaml`,
    policyPath: `${dir}/policies`,
  });
  return { config, state, events };
}

async function mounted(fleet: string) {
  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(`${dir}/fleet.yaml`, fleet);
  await Deno.mkdir(`${dir}/policies`);
  await Deno.writeTextFile(`${dir}/policies/acme.yaml`, 'tenants:\n  acme:\n    allow: ["*"]\n');
  return { dir, [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }) };
}

Deno.test("mounted config: an admin edit of the fleet is refused as read-only, with a 409 fleet_read_only", async () => {
  await using files = await mounted(fleetText("alpha"));
  const { config } = replica(files.dir);
  const error = await config.fleetStore.edit(addServer({ id: "beta", url: "https://b.example" }), {
    validate: (text) => text,
  }).then(() => assert.fail("a mounted fleet was edited"), (e) => e);
  assert.ok(error instanceof FleetEditError);
  assert.equal(error.kind, "read_only");
  const answer = fleetEditRefusal(error)!;
  assert.equal(answer.status, 409);
  const body = await answer.json();
  assert.equal(body.error.code, "fleet_read_only");
  assert.match(body.error.message, /change the file \(the ConfigMap\)/);
  assert.equal(await Deno.readTextFile(`${files.dir}/fleet.yaml`), fleetText("alpha"));
});

Deno.test("mounted config: replicas with the same files report the same digests, and a changed file a new one", async () => {
  await using files = await mounted(fleetText("alpha"));
  const [one, two] = [replica(files.dir), replica(files.dir)];
  for (const { config } of [one, two]) {
    assert.ok(await config.startFleet());
    assert.ok(await config.startPolicies());
  }
  assert.match(one.config.digests.fleet ?? "", /^sha256:[0-9a-f]{12}$/);
  assert.deepEqual(one.config.digests, two.config.digests);
  const before = one.config.digests;
  await Deno.writeTextFile(`${files.dir}/fleet.yaml`, fleetText("alpha", "beta"));
  await one.config.reloadFleet();
  assert.deepEqual(one.state.fleet, ["alpha", "beta"]);
  assert.notEqual(one.config.digests.fleet, before.fleet);
  assert.equal(one.config.digests.policies, before.policies);
});

Deno.test("mounted config: a broken file keeps what runs and is published as fleet.reload_failed / policy.reload_failed", async () => {
  await using files = await mounted(fleetText("alpha"));
  const { config, state, events } = replica(files.dir);
  await config.startFleet();
  await config.reloadFleet();
  const digest = config.digests.fleet;
  await Deno.writeTextFile(`${files.dir}/fleet.yaml`, "proxy_servers:\n  - id: Bad Id\n");
  await assert.rejects(() => config.reloadFleet(), /Bad Id/);
  await Deno.writeTextFile(`${files.dir}/policies/acme.yaml`, "tenants:\n  acme:\n    allow: 7\n");
  await assert.rejects(() => config.reloadPolicies(), /allow/);
  assert.deepEqual(state.fleet, ["alpha"]);
  assert.equal(config.digests.fleet, digest, "the digest is of what runs");
  assert.deepEqual(events.map((e) => e.type), ["fleet.reload_failed", "policy.reload_failed"]);
  assert.match(config.rejected.fleet?.reason ?? "", /Bad Id/);
  assert.ok(config.rejected.policies);
});
