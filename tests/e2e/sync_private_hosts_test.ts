/**
 * SSRF through sync: a hostile registry served on 127.0.0.1 lists remotes whose URLs point into
 * the gateway's own network, spelled every way the URL parser accepts. Sync refuses each (naming
 * the normalised host) unless MCP_SYNC_ALLOW_PRIVATE=true; the registry itself being on loopback
 * is fine. Discovery, private by nature, proposes such URLs with a visible warning.
 */
import assert from "node:assert/strict";
import { runSyncCommand } from "../../cli/sync_cli.ts";
import { candidateProposals } from "../../core/sync/discovery_service.ts";
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

function listing() {
  const entry = (name: string, url: string) => ({
    server: { name, version: "1.0.0", remotes: [{ type: "streamable-http", url }] },
    _meta: { [META]: { status: "active", isLatest: true, updatedAt: "2025-09-01T00:00:00Z" } },
  });
  return {
    servers: [
      ...INSIDE.map(([url], i) => entry(`io.github.evil/inside-${i}`, url)),
      entry("io.github.acme/public", "https://mcp.example.com/mcp"),
    ],
    metadata: { count: INSIDE.length + 1 },
  };
}

async function syncAgainstHostileRegistry(env: Record<string, string>) {
  const registry = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => Response.json(listing()),
  );
  const fleet = await writeFleet("proxy_servers: []\n");
  let out = "";
  let err = "";
  try {
    const code = await runSyncCommand(
      ["--registry", `http://127.0.0.1:${registry.addr.port}`, "--config", fleet.path, "--json"],
      { out: (t) => out += t, err: (t) => err += t + "\n", env },
    );
    assert.equal(code, 0, err);
    return JSON.parse(out) as {
      proposals: { name: string; entry?: { url?: string } }[];
      skipped: { name: string; reason: string }[];
    };
  } finally {
    await fleet.remove();
    await registry.shutdown();
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
