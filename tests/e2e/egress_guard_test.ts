/**
 * DNS rebinding through a registry's entry (docs/security.md): an HTTP upstream written by
 * registry sync is reached only through the egress guard, which looks its name up at every
 * connection and connects to the address it judged. Real processes throughout: a DNS server on
 * 127.0.0.1 answering for the attacker's name (TTL 0), a real MCP server on 127.0.0.1 standing in
 * for what lives inside the gateway's network, the gateway's real relay worker and fetch.
 */
import assert from "node:assert/strict";
import type { ResolveHost } from "../../core/support/private_address.ts";
import { startHeaderEchoServer } from "../fixtures/upstreams/header_echo_server.ts";
import { startEverything } from "../fixtures/upstreams/reference_server.ts";
import { startDnsServer } from "../support/dns_server.ts";
import { eventually, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";

const NAME = "rebind.attacker.test";
/** A public address (TEST-NET-3 is documentation-only, so nothing answers there). */
const PUBLIC = "203.0.113.7";

/** A fleet with one entry as registry sync writes it: the marker line, then a remote. */
function syncedFleet(port: number): string {
  return `proxy_servers:
  # synced from registry: io.example/evil@1.0.0
  - id: evil
    transport: http
    url: http://${NAME}:${port}/mcp
    timeouts: { connect: 5 }
`;
}

/** Runs `fn` on a gateway serving the synced entry, the inside server and DNS answering `answers`. */
async function withSyncedUpstream(
  answers: string[],
  env: Record<string, string>,
  fn: (ctx: {
    gateway: TestGateway;
    inside: ReturnType<typeof startHeaderEchoServer>;
    names: Record<string, string[]>;
    lookups: () => number;
  }) => Promise<void>,
  resolveWith?: (dns: ResolveHost, names: Record<string, string[]>) => ResolveHost,
): Promise<void> {
  const inside = startHeaderEchoServer();
  const names: Record<string, string[]> = { [NAME]: answers };
  const dns = await startDnsServer(names);
  let count = 0;
  const base = resolveWith ? resolveWith(dns.resolveHost, names) : dns.resolveHost;
  const resolveHost: ResolveHost = (host, signal) => {
    if (host === NAME) count++;
    return base(host, signal);
  };
  const fleet = await writeFleet(syncedFleet(Number(new URL(inside.url).port)));
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path }, {
    resolveHost,
    kernelEnv: env,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn({ gateway, inside, names, lookups: () => count });
  } finally {
    await gateway.stop();
    await fleet.remove();
    await dns.close();
    await inside.close();
  }
}

function upstream(gateway: TestGateway) {
  return gateway.kernel.proxy.status().find((s) => s.id === "evil");
}

Deno.test("A registry's upstream whose name resolves into the gateway's network is refused before any connection, naming the address and the fix", async () => {
  await withSyncedUpstream(["127.0.0.1"], {}, async ({ gateway, inside }) => {
    await eventually(() => upstream(gateway)?.lastError !== undefined, "the refusal");
    const error = upstream(gateway)!.lastError!;
    assert.match(error, new RegExp(`${NAME.replaceAll(".", "\\.")} resolves to 127\\.0\\.0\\.1`));
    assert.match(error, /loopback address, inside the gateway's own network/);
    assert.match(error, /MCP_SYNC_ALLOW_PRIVATE=true/);
    assert.notEqual(upstream(gateway)!.state, "READY");
    assert.deepEqual(inside.authorizations, [], "no request reached the server inside");
  });
});

Deno.test("A name that rebinds after the gateway's check is refused at the connection, which the guard resolves itself", async () => {
  // The attacker's DNS answers a public address to the first lookup, then the inside address:
  // the gateway's check passes, and the connection is what must not follow the new answer.
  const rebinding = (dns: ResolveHost, names: Record<string, string[]>): ResolveHost => {
    let asked = 0;
    return async (host, signal) => {
      const answer = await dns(host, signal);
      if (host === NAME && ++asked === 1) names[NAME] = ["127.0.0.1"];
      return answer;
    };
  };
  await withSyncedUpstream([PUBLIC], {}, async ({ gateway, inside, lookups }) => {
    await eventually(() => upstream(gateway)?.lastError !== undefined, "the failed connect");
    assert.ok(lookups() >= 2, `the guard looked the name up again (${lookups()} lookups)`);
    assert.notEqual(upstream(gateway)!.state, "READY");
    assert.deepEqual(inside.authorizations, [], "no request reached the server inside");
    assert.ok(
      gateway.logs.some((line) =>
        line.includes("egress guard refused") && line.includes(`${NAME} resolves to 127.0.0.1`)
      ),
      "the guard logs what it refused",
    );
  }, rebinding);
});

Deno.test("With MCP_SYNC_ALLOW_PRIVATE=true a registry's upstream is reached by its name at the address the guard resolved", async () => {
  // The system's resolver knows nothing of the name: only the guard's lookup can find it, so a
  // working call shows the worker resolved nothing itself.
  await withSyncedUpstream(
    ["127.0.0.1"],
    { MCP_SYNC_ALLOW_PRIVATE: "true" },
    async ({ gateway, inside }) => {
      await eventually(() => upstream(gateway)?.state === "READY", "the upstream ready");
      const client = await connectHttp(gateway);
      try {
        const result = await client.callTool({ name: "evil__headers", arguments: {} });
        const [content] = result.content as { type: string; text: string }[];
        const headers = JSON.parse(content!.text) as Record<string, string>;
        assert.equal(headers.host, `${NAME}:${new URL(inside.url).port}`);
      } finally {
        await client.close();
      }
    },
  );
});

Deno.test("An operator's own entry (no marker) is not sent through the guard", async () => {
  const inside = startHeaderEchoServer();
  const fleet = await writeFleet(`proxy_servers:
  - id: own
    transport: http
    url: ${inside.url}
`);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  try {
    await gateway.kernel.fleetStarted;
    await eventually(
      () => gateway.kernel.proxy.status().find((s) => s.id === "own")?.state === "READY",
      "the operator's upstream ready",
    );
    assert.ok(inside.authorizations.length > 0);
  } finally {
    await gateway.stop();
    await fleet.remove();
    await inside.close();
  }
});

Deno.test("A registry's SSE upstream goes through the guard too: server-everything's SSE mode is reached by its name", async () => {
  const everything = await startEverything("sse");
  const dns = await startDnsServer({ [NAME]: ["127.0.0.1"] });
  const url = new URL(everything.url);
  url.hostname = NAME;
  const fleet = await writeFleet(`proxy_servers:
  # synced from registry: io.example/legacy@1.0.0
  - id: legacy
    transport: sse
    url: ${url.href}
`);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path }, {
    resolveHost: dns.resolveHost,
    kernelEnv: { MCP_SYNC_ALLOW_PRIVATE: "true" },
  });
  try {
    await gateway.kernel.fleetStarted;
    const legacy = () => gateway.kernel.proxy.status().find((s) => s.id === "legacy");
    await eventually(() => legacy()?.state === "READY", "the SSE upstream ready");
    const client = await connectHttp(gateway);
    try {
      const result = await client.callTool({ name: "legacy__echo", arguments: { message: "hi" } });
      assert.match(JSON.stringify(result.content), /hi/);
    } finally {
      await client.close();
    }
  } finally {
    await gateway.stop();
    await fleet.remove();
    await dns.close();
    await everything.stop();
  }
});
