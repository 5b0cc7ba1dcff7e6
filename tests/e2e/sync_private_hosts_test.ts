/**
 * SSRF through sync: a hostile registry served on 127.0.0.1 lists remotes whose URLs point into
 * the gateway's own network, spelled every way the URL parser accepts. Sync refuses each (naming
 * the normalised host) unless MCP_SYNC_ALLOW_PRIVATE=true; the registry itself being on loopback
 * is fine. Discovery, private by nature, proposes such URLs with a visible warning.
 */
import assert from "node:assert/strict";
import { runSyncCommand } from "../../cli/sync_cli.ts";
import { candidateProposals } from "../../core/sync/discovery_service.ts";
import type { ResolveHost } from "../../core/support/private_address.ts";
import { startDnsServer } from "../support/dns_server.ts";
import { writeFleet } from "../support/fleet.ts";

const META = "io.modelcontextprotocol.registry/official";
const INSIDE: [string, string][] = [
  ["http://127.0.0.1:9/mcp", "127.0.0.1"],
  ["http://0x7f.1/mcp", "127.0.0.1"],
  ["http://2130706433/mcp", "127.0.0.1"],
  ["http://[::ffff:127.0.0.1]/mcp", "[::ffff:7f00:1]"],
  ["http://[::1]:8080/mcp", "[::1]"],
  ["http://169.254.169.254/latest/meta-data/", "169.254.169.254"],
  ["http://10.0.0.5/mcp", "10.0.0.5"],
  ["http://172.16.3.4/mcp", "172.16.3.4"],
  ["http://192.168.1.20/mcp", "192.168.1.20"],
  ["http://[fd00::7]/mcp", "[fd00::7]"],
  ["http://localhost:3000/mcp", "localhost"],
];

const entry = (name: string, url: string) => ({
  server: { name, version: "1.0.0", remotes: [{ type: "streamable-http", url }] },
  _meta: { [META]: { status: "active", isLatest: true, updatedAt: "2025-09-01T00:00:00Z" } },
});

function listing() {
  return {
    servers: [
      ...INSIDE.map(([url], i) => entry(`io.github.evil/inside-${i}`, url)),
      entry("io.github.acme/public", "https://mcp.example.com/mcp"),
    ],
    metadata: { count: INSIDE.length + 1 },
  };
}

async function syncAgainstHostileRegistry(
  env: Record<string, string>,
  served: unknown = listing(),
  resolveHost?: ResolveHost,
) {
  const registry = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => Response.json(served),
  );
  // Without a table of names, a DNS server of the test's own where none resolves, not the machine's.
  const nowhere = resolveHost ? undefined : await startDnsServer({});
  const fleet = await writeFleet("proxy_servers: []\n");
  let out = "";
  let err = "";
  try {
    const code = await runSyncCommand(
      ["--registry", `http://127.0.0.1:${registry.addr.port}`, "--config", fleet.path, "--json"],
      {
        out: (t) => out += t,
        err: (t) => err += t + "\n",
        env,
        resolveHost: resolveHost ?? nowhere!.resolveHost,
      },
    );
    assert.equal(code, 0, err);
    return JSON.parse(out) as {
      proposals: { name: string; entry?: { url?: string } }[];
      skipped: { name: string; reason: string }[];
    };
  } finally {
    await fleet.remove();
    await registry.shutdown();
    await nowhere?.close();
  }
}

Deno.test("Sync refuses registry remotes on loopback, link-local and private hosts, in any spelling", async () => {
  const plan = await syncAgainstHostileRegistry({});
  assert.deepEqual(plan.proposals.map((p) => p.entry?.url), ["https://mcp.example.com/mcp"]);
  for (const [i, [url, host]] of INSIDE.entries()) {
    const skipped = plan.skipped.find((s) => s.name === `io.github.evil/inside-${i}`);
    assert.ok(skipped, `${url} was not refused`);
    assert.match(skipped.reason, new RegExp(`remote url host ${host.replace(/[[\].]/g, "\\$&")} `));
    assert.match(skipped.reason, /inside the gateway's own network/);
    assert.match(skipped.reason, /MCP_SYNC_ALLOW_PRIVATE=true/);
  }
  const metadata = plan.skipped.find((s) => s.reason.includes("169.254.169.254"))!;
  assert.match(metadata.reason, /link-local address \(where cloud metadata services answer\)/);
});

Deno.test("MCP_SYNC_ALLOW_PRIVATE=true lets registry remotes point at private hosts", async () => {
  const plan = await syncAgainstHostileRegistry({ MCP_SYNC_ALLOW_PRIVATE: "true" });
  assert.equal(plan.proposals.length, INSIDE.length + 1);
  assert.ok(!plan.skipped.some((s) => s.reason.includes("own network")));
});

Deno.test("Discovery proposes a server on a private address with a visible warning", () => {
  const proposals = candidateProposals(
    [
      { id: "lan/printer", source: "lan", transport: "http", url: "http://192.168.1.9:8000/mcp" },
      { id: "lan/odd", source: "lan", transport: "http", url: "http://0xa.1/mcp" },
      { id: "web/public", source: "lan", transport: "http", url: "https://mcp.example.com/mcp" },
    ],
    [],
    new Set(),
  );
  const by = (name: string) => proposals.find((p) => p.name === name)!;
  assert.match(by("lan/printer").warning!, /host 192\.168\.1\.9 is a private address/);
  assert.match(by("lan/odd").warning!, /host 10\.0\.0\.1 is a private address/);
  assert.equal(by("web/public").warning, undefined);
});

/** Names an attacker's DNS points into the gateway's network, and two it does not. */
const NAMED: Record<string, string[]> = {
  "meta.evil.test": ["169.254.169.254"],
  "lan.evil.test": ["93.184.216.34", "10.0.0.5"],
  "six.evil.test": ["fd00::7"],
  "public.example.test": ["93.184.216.34"],
};

async function syncWithNames(env: Record<string, string>) {
  const dns = await startDnsServer(NAMED);
  try {
    const servers = [
      ...Object.keys(NAMED).map((host) => entry(`io.github.x/${host}`, `https://${host}/mcp`)),
      entry("io.github.x/unresolved", "https://nowhere.example.test/mcp"),
    ];
    return await syncAgainstHostileRegistry(
      env,
      { servers, metadata: { count: servers.length } },
      dns.resolveHost,
    );
  } finally {
    await dns.close();
  }
}

Deno.test("Sync refuses registry remotes whose DNS name resolves into the gateway's own network, naming the address", async () => {
  const plan = await syncWithNames({});
  assert.deepEqual(plan.proposals.map((p) => p.entry?.url).sort(), [
    "https://nowhere.example.test/mcp",
    "https://public.example.test/mcp",
  ]);
  const reason = (host: string) =>
    plan.skipped.find((s) => s.name === `io.github.x/${host}`)?.reason ?? `${host} not refused`;
  assert.match(
    reason("meta.evil.test"),
    /remote url host meta\.evil\.test resolves to 169\.254\.169\.254, a link-local address/,
  );
  assert.match(reason("lan.evil.test"), /resolves to 10\.0\.0\.5, a private address/);
  assert.match(reason("six.evil.test"), /resolves to fd00::7, a unique-local address/);
  for (const host of ["meta.evil.test", "lan.evil.test", "six.evil.test"]) {
    assert.match(reason(host), /MCP_SYNC_ALLOW_PRIVATE=true/);
  }
});

Deno.test("MCP_SYNC_ALLOW_PRIVATE=true lets registry remotes use names that resolve inside too", async () => {
  const plan = await syncWithNames({ MCP_SYNC_ALLOW_PRIVATE: "true" });
  assert.equal(plan.proposals.length, 5);
});
