import assert from "node:assert/strict";
import { parse } from "yaml";
import { principalOf, type TokenPayload } from "../auth/token_payload.ts";
import type { DiscoveryCandidate } from "../plugin_api/mod.ts";
import { systemClock } from "../support/clock.ts";
import { createLogger } from "../support/logger.ts";
import type { DiscoveryService } from "../sync/discovery_service.ts";
import { proposalDigest } from "../sync/proposal_identity.ts";
import { planSync } from "../sync/sync_plan.ts";
import { proposalsOf } from "../sync/sync_store.ts";
import type { OperatorHost } from "./operator_host.ts";
import { SYNC_PATH, syncRoutes } from "./sync_routes.ts";

const ADMIN: TokenPayload = {
  tenant: "t",
  scopes: ["admin"],
  subject: "admin",
  principal: principalOf("tokens_file", "admin"),
};
const LEGIT: DiscoveryCandidate = {
  id: "notes",
  source: "lan",
  transport: "http",
  url: "http://192.168.1.20:8931/mcp",
};
const EVIL: DiscoveryCandidate = { ...LEGIT, id: "NOTES", url: "http://192.168.1.66/mcp" };
const EMPTY_FLEET = "proxy_servers:\n";

interface Listed {
  id: string;
  source: string;
  digest: string;
  yaml?: string;
  entry?: { url?: string };
}

/** A gateway as the sync routes see it, running discovery over `candidates` (mutable). */
async function fakeGateway(candidates: DiscoveryCandidate[]) {
  const dir = await Deno.makeTempDir();
  const fleetPath = `${dir}/fleet.yaml`;
  await Deno.writeTextFile(fleetPath, EMPTY_FLEET);
  const logs: string[] = [];
  const applied: unknown[] = [];
  const host = {
    config: { proxy: { configPath: fleetPath }, discovery: { timeoutMs: 1_000 } },
    env: {},
    clock: systemClock,
    logger: createLogger({ sink: (line) => logs.push(line) }),
    fleet: [],
    fleetStore: undefined,
    discovery: { candidates, plugins: ["discovery-lan"], refresh: () => Promise.resolve([]) },
    pluginsOf: () => [],
    checkFleet: (text: string) => ({ servers: parse(text).proxy_servers ?? [] }),
    applyFleet: (servers: unknown) => (applied.push(servers), Promise.resolve({})),
  } as unknown as OperatorHost & { discovery: Pick<DiscoveryService, "candidates"> };
  const [route] = syncRoutes(host);
  const call = async (name: string, body?: unknown) => {
    const response = await route!.handle(
      new Request(`http://gw${SYNC_PATH}/${name}`, {
        method: body === undefined ? "GET" : "POST",
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
      ADMIN,
    );
    return { status: response.status, body: await response.json() };
  };
  return {
    host,
    logs,
    applied,
    fleetPath,
    call,
    list: async () => (await call("proposals")).body.proposals as Listed[],
    remove: () => Deno.remove(dir, { recursive: true }),
  };
}

Deno.test("A proposal changed since it was listed (same id, other yaml) is refused with 409 proposal_changed, and the fleet file is not written", async () => {
  const candidates = [LEGIT, EVIL];
  const gw = await fakeGateway(candidates);
  try {
    const reviewed = (await gw.list()).find((p) => p.id === "add:lan-notes")!;
    assert.equal(reviewed.entry?.url, LEGIT.url);
    // The PoC's swap: the real server drops out for a round and comes back after the attacker's.
    candidates.splice(0, candidates.length, EVIL, LEGIT);
    const now = (await gw.list()).find((p) => p.id === "add:lan-notes")!;
    assert.equal(now.entry?.url, EVIL.url, "the same id now names the attacker's URL");

    const refused = await gw.call("apply", {
      ids: ["add:lan-notes"],
      digests: { "add:lan-notes": reviewed.digest },
    });
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error.code, "proposal_changed");
    assert.match(refused.body.error.message, /"add:lan-notes" changed since it was listed/);
    assert.match(
      refused.body.error.message,
      /review it again: reload GET \/v1\/mcp\/sync\/proposals/,
    );
    assert.equal(await Deno.readTextFile(gw.fleetPath), EMPTY_FLEET);
    assert.deepEqual(gw.applied, []);
  } finally {
    await gw.remove();
  }
});

Deno.test("One changed proposal refuses the whole apply: the unchanged ones with it are not written either", async () => {
  const other = { ...LEGIT, id: "wiki", url: "http://192.168.1.21/mcp" };
  const candidates = [LEGIT, other];
  const gw = await fakeGateway(candidates);
  try {
    const listed = await gw.list();
    const digests = Object.fromEntries(listed.map((p) => [p.id, p.digest]));
    candidates[0] = { ...LEGIT, url: "http://192.168.1.66/mcp" };
    const refused = await gw.call("apply", { ids: Object.keys(digests), digests });
    assert.equal(refused.status, 409);
    assert.doesNotMatch(refused.body.error.message, /lan-wiki/);
    assert.equal(await Deno.readTextFile(gw.fleetPath), EMPTY_FLEET);
  } finally {
    await gw.remove();
  }
});

Deno.test("The digest listed is the SHA-256 of the proposal's yaml, the one apply checks", async () => {
  const gw = await fakeGateway([LEGIT]);
  try {
    const [listed] = await gw.list();
    const hex = async (text: string) =>
      Array.from(
        new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))),
        (b) => b.toString(16).padStart(2, "0"),
      ).join("");
    assert.equal(listed!.digest, await hex(listed!.yaml!));
    const { digest: _, ...proposal } = listed!;
    assert.equal(proposalDigest(proposal as Parameters<typeof proposalDigest>[0]), listed!.digest);
  } finally {
    await gw.remove();
  }
});

Deno.test("An apply with the digest listed writes exactly the proposal's yaml", async () => {
  const gw = await fakeGateway([LEGIT]);
  try {
    const [listed] = await gw.list();
    const done = await gw.call("apply", {
      ids: [listed!.id],
      digests: { [listed!.id]: listed!.digest },
    });
    assert.equal(done.status, 200, JSON.stringify(done.body));
    const indent = (yaml: string) =>
      yaml.trimEnd().split("\n").map((line) => `  ${line}`).join("\n") + "\n";
    assert.equal(await Deno.readTextFile(gw.fleetPath), EMPTY_FLEET + indent(listed!.yaml!));
    assert.equal(gw.applied.length, 1);
  } finally {
    await gw.remove();
  }
});

Deno.test("Digests must be strings by id, each for an id applied: a stray or malformed one is a 400", async () => {
  const gw = await fakeGateway([LEGIT]);
  try {
    const [listed] = await gw.list();
    for (const digests of [["x"], { [listed!.id]: 1 }, { "add:LAN-notes": listed!.digest }]) {
      const refused = await gw.call("apply", { ids: [listed!.id], digests });
      assert.equal(refused.status, 400, JSON.stringify(digests));
      assert.equal(refused.body.error.code, "invalid_request");
    }
    assert.equal(await Deno.readTextFile(gw.fleetPath), EMPTY_FLEET);
  } finally {
    await gw.remove();
  }
});

Deno.test("An apply must give each id the digest it was listed with: without one it is a 400 naming the id, and nothing is written", async () => {
  const other = { ...LEGIT, id: "wiki", url: "http://192.168.1.21/mcp" };
  const gw = await fakeGateway([LEGIT, other]);
  try {
    const [first, second] = await gw.list();
    const none = await gw.call("apply", { ids: [first!.id] });
    assert.equal(none.status, 400);
    assert.match(none.body.error.message, /digests must be an object giving each id's digest/);
    assert.match(none.body.error.message, /apply writes only the proposal that was reviewed/);
    const partial = await gw.call("apply", {
      ids: [first!.id, second!.id],
      digests: { [first!.id]: first!.digest },
    });
    assert.equal(partial.status, 400);
    assert.equal(partial.body.error.code, "invalid_request");
    assert.match(partial.body.error.message, new RegExp(`digests gives none for "${second!.id}"`));
    assert.equal(await Deno.readTextFile(gw.fleetPath), EMPTY_FLEET);
    assert.deepEqual(gw.applied, []);
  } finally {
    await gw.remove();
  }
});

Deno.test("A discovery proposal with a registry proposal's id is left out, said once in the log, and apply writes the registry's", async () => {
  const gw = await fakeGateway([EVIL]);
  try {
    const plan = planSync(
      EMPTY_FLEET,
      {
        servers: [{
          server: {
            name: "io.github.lan/notes",
            version: "1.0.0",
            remotes: [{ type: "streamable-http", url: "https://notes.example.com/mcp" }],
          },
          status: "active",
          isLatest: true,
        }],
        skipped: [],
      } as unknown as Parameters<typeof planSync>[1],
      { complete: true, env: {}, trusted: true },
    );
    proposalsOf(gw.host).setRegistry({
      ...plan,
      registry: "https://registry.example.com",
      fleetPath: gw.fleetPath,
      readAt: "2025-01-01T00:00:00Z",
      filtered: false,
    });
    const listed = await gw.list();
    await gw.list();
    assert.deepEqual(listed.map((p) => `${p.id} ${p.source}`), ["add:lan-notes registry"]);
    const warnings = gw.logs.filter((l) => l.includes("add:lan-notes from discovery:lan"));
    assert.equal(warnings.length, 1, gw.logs.join("\n"));
    assert.match(warnings[0]!, /^WARN .*cannot be applied: registry proposes the same id/);

    const done = await gw.call("apply", {
      ids: ["add:lan-notes"],
      digests: { "add:lan-notes": listed[0]!.digest },
    });
    assert.equal(done.status, 200, JSON.stringify(done.body));
    const fleet = await Deno.readTextFile(gw.fleetPath);
    assert.match(fleet, /notes\.example\.com/);
    assert.doesNotMatch(fleet, /192\.168\.1\.66/);
  } finally {
    await gw.remove();
  }
});
