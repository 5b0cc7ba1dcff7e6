/**
 * Tenant isolation of upstream traffic, attacked with real processes: two tenants (JWTs) call one
 * stdio upstream (tests/fixtures/upstreams/sampling_server.ts) that logs and asks for sampling
 * during the call. Shared, the gateway cannot tell whose call a request belongs to and relays it
 * to no one; per tenant or per session, each caller gets exactly its own.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  type CallToolResult,
  CreateMessageRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { MAX_RELAYED_PER_CALL } from "../../core/mcp/upstream_context.ts";
import { eventually, fixture } from "../support/fleet.ts";
import type { TestGateway } from "../support/gateway.ts";
import { policyJwt, withPolicyGateway } from "../support/policy_gateway.ts";
import { startHeaderEchoServer } from "../fixtures/upstreams/header_echo_server.ts";
import { startSamplingHttpServer } from "../fixtures/upstreams/sampling_http_server.ts";
import { processAlive } from "../fixtures/upstreams/support.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const POLICY = `
tenants:
  "*":
    allow: ["*"]
connectors:
  sampling:
    tenants: ["*"]
    effects: [read, write, destructive]
  echo:
    tenants: ["*"]
    effects: [read, write, destructive]
  remote:
    tenants: ["*"]
    effects: [read, write, destructive]
`;

/** A fleet entry for the sampling fixture; `extra` is more YAML for the entry (4-space indent). */
function samplingServer(extra = ""): string {
  const command = [
    "deno",
    "run",
    "--config",
    `${ROOT}deno.json`,
    fixture("upstreams/sampling_server.ts"),
  ];
  return `proxy_servers:
  - id: sampling
    command: ${JSON.stringify(command)}
    sandbox: deno
    permissions: { env: [SAMPLING_SECRET], read: true }
${extra}`;
}

function withGateway(
  fleetYaml: string,
  fn: (gateway: TestGateway) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  return withPolicyGateway(fleetYaml, POLICY, fn, env);
}

function jwt(tenant: string, sub = `${tenant}-user`): Promise<string> {
  return policyJwt(tenant, sub, "mcp", ["agent33-test-upstream"]);
}

/** A tenant's client that answers sampling with its own name and records all it receives. */
interface Caller {
  client: Client;
  /** Its bearer token. */
  token: string;
  /** Every byte of upstream traffic this client received: sampling prompts and log lines. */
  received: string[];
  call(tool: string, args?: Record<string, unknown>): Promise<CallToolResult>;
}

async function caller(
  gateway: TestGateway,
  tenant: string,
  headers: Record<string, string> = {},
): Promise<Caller> {
  const client = new Client({ name: `client-${tenant}`, version: "1" }, {
    capabilities: { sampling: {} },
  });
  const received: string[] = [];
  client.setRequestHandler(CreateMessageRequestSchema, (request) => {
    received.push(JSON.stringify(request.params));
    return {
      role: "assistant",
      model: "test",
      content: { type: "text", text: `sampled by ${tenant}` },
    };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    received.push(JSON.stringify(n.params));
  });
  const token = await jwt(tenant);
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } },
    }),
  );
  return {
    client,
    token,
    received,
    call: (tool, args = {}) =>
      client.callTool({
        name: tool.includes("__") ? tool : `sampling__${tool}`,
        arguments: args,
      }) as Promise<CallToolResult>,
  };
}

const text = (result: CallToolResult) =>
  result.content.map((c) => (c.type === "text" ? c.text : "")).join("");

Deno.test("A shared stdio upstream's sampling and logs reach neither of two tenants calling at once", async () => {
  await withGateway(samplingServer(), async (gateway) => {
    const a = await caller(gateway, "acme");
    const b = await caller(gateway, "globex");
    try {
      const [ra, rb] = await Promise.all([
        a.call("ask", { marker: "ALPHA", wait_for: 2 }),
        b.call("ask", { marker: "BRAVO", wait_for: 2 }),
      ]);
      // Each result is its own, with a clear refusal instead of the other tenant's answer.
      assert.equal(ra.isError, true);
      assert.equal(rb.isError, true);
      assert.match(text(ra), /^sampling failed: .*ambiguous.*scope: tenant or scope: session/);
      assert.match(text(rb), /^sampling failed: .*ambiguous/);
      assert.doesNotMatch(text(ra), /BRAVO|globex/);
      assert.doesNotMatch(text(rb), /ALPHA|acme/);
      // No byte of either tenant's traffic reached the other (nor, ambiguous, itself).
      assert.deepEqual(a.received.filter((r) => r.includes("BRAVO")), []);
      assert.deepEqual(b.received.filter((r) => r.includes("ALPHA")), []);
      assert.deepEqual([...a.received, ...b.received], []);
      // The log lines went to the operator log only.
      assert.ok(
        gateway.logs.some((l) => l.includes("upstream log not relayed") && l.includes("ALPHA")),
      );
    } finally {
      await a.client.close();
      await b.client.close();
    }
  });
});

Deno.test("A shared upstream relays sampling and logs exactly when one session has calls in flight", async () => {
  await withGateway(samplingServer(), async (gateway) => {
    const a = await caller(gateway, "acme");
    try {
      const result = await a.call("ask", { marker: "ALPHA" });
      assert.equal(text(result), "answer for ALPHA: sampled by acme");
      await eventually(() => a.received.length === 2, "the log line and the sampling request");
      assert.ok(a.received.some((r) => r.includes("private log of ALPHA")));
      assert.ok(a.received.some((r) => r.includes("prompt of ALPHA")));
    } finally {
      await a.client.close();
    }
  });
});

Deno.test("A shared upstream's late sampling and logs of a call that answered reach no other tenant's call", async () => {
  await withGateway(samplingServer(), async (gateway) => {
    const victim = await caller(gateway, "acme");
    const attacker = await caller(gateway, "globex");
    try {
      assert.equal(
        text(await victim.call("start_job", { marker: "ACME-PAYROLL" })),
        "job started for ACME-PAYROLL",
      );
      // The attacker's call is the only one in flight when the victim's job logs and asks.
      const held = await attacker.call("hold");
      assert.match(text(held), /^late sampling failed: .*ambiguous/);
      assert.deepEqual(attacker.received, [], "no byte of the victim's late traffic");
      assert.deepEqual(victim.received, []);
      assert.ok(
        gateway.logs.some((l) =>
          l.includes("upstream log not relayed") && l.includes("ACME-PAYROLL")
        ),
        "the late log went to the operator log only",
      );
    } finally {
      await victim.client.close();
      await attacker.client.close();
    }
  });
});

Deno.test("A relayed sampling request carries no includeContext, and one call may make at most 100", async () => {
  await withGateway(samplingServer(), async (gateway) => {
    const a = await caller(gateway, "acme");
    try {
      const result = await a.call("ask_many", { count: 150 });
      assert.equal(text(result), `${MAX_RELAYED_PER_CALL} granted, 50 refused`);
      assert.equal(a.received.length, MAX_RELAYED_PER_CALL);
      assert.ok(
        a.received.every((r) => !r.includes("includeContext")),
        "no other server's context",
      );
    } finally {
      await a.client.close();
    }
  });
});

Deno.test("With scope: tenant, two tenants calling at once each get their own sampling and logs", async () => {
  await withGateway(samplingServer("    scope: tenant\n"), async (gateway) => {
    const a = await caller(gateway, "acme");
    const b = await caller(gateway, "globex");
    try {
      const [ra, rb] = await Promise.all([
        a.call("ask", { marker: "ALPHA" }),
        b.call("ask", { marker: "BRAVO" }),
      ]);
      assert.equal(text(ra), "answer for ALPHA: sampled by acme");
      assert.equal(text(rb), "answer for BRAVO: sampled by globex");
      await eventually(
        () => a.received.length === 2 && b.received.length === 2,
        "each tenant's log line and sampling request",
      );
      assert.ok(a.received.every((r) => r.includes("ALPHA") && !r.includes("BRAVO")));
      assert.ok(b.received.every((r) => r.includes("BRAVO") && !r.includes("ALPHA")));
      // Two instances, one per tenant, besides the catalog template.
      const [status] = gateway.kernel.proxy.status();
      assert.equal(status!.scope, "tenant");
      assert.deepEqual(status!.instances!.map((i) => i.instance).sort(), ["acme", "globex"]);
      const pids = await Promise.all(
        [a, b].map(async (c) => JSON.parse(text(await c.call("whoami"))).pid),
      );
      assert.notEqual(pids[0], pids[1]);
    } finally {
      await a.client.close();
      await b.client.close();
    }
  });
});

Deno.test("With scope: tenant, two tenants subscribed to one URI each hear only their own instance's updates", async () => {
  await withGateway(samplingServer("    scope: tenant\n"), async (gateway) => {
    const a = await caller(gateway, "acme");
    const b = await caller(gateway, "globex");
    const heard = { acme: [] as string[], globex: [] as string[] };
    a.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      heard.acme.push(n.params.uri);
    });
    b.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      heard.globex.push(n.params.uri);
    });
    try {
      const { resources } = await a.client.listResources();
      const uri = resources.find((r) => r.uri.endsWith("sampling://state"))!.uri;
      await a.client.subscribeResource({ uri });
      await b.client.subscribeResource({ uri });
      await a.call("touch", { marker: "ALPHA" });
      await eventually(() => heard.acme.length === 1, "acme's update");
      // globex's own touch is its first update: acme's never reached it.
      await b.call("touch", { marker: "BRAVO" });
      await eventually(() => heard.globex.length === 1, "globex's update");
      assert.deepEqual(heard, { acme: [uri], globex: [uri] });
      // What each read after its update is its own instance's state.
      const read = async (c: Caller) => {
        const { contents } = await c.client.readResource({ uri });
        return contents.map((x) => ("text" in x ? x.text : "")).join("");
      };
      assert.deepEqual([await read(a), await read(b)], ["ALPHA", "BRAVO"]);
      // Unsubscribed, acme hears nothing more; globex, still subscribed, does.
      await a.client.unsubscribeResource({ uri });
      await a.call("touch", { marker: "ALPHA2" });
      await b.call("touch", { marker: "BRAVO2" });
      await eventually(() => heard.globex.length === 2, "globex's second update");
      assert.deepEqual(heard.acme, [uri]);
    } finally {
      await a.client.close();
      await b.client.close();
    }
  });
});

Deno.test("With scope: session, the session's instance stops when the session ends", async () => {
  await withGateway(
    samplingServer("    scope: session\n    max_instances: 1\n"),
    async (gateway) => {
      const a = await caller(gateway, "acme");
      const b = await caller(gateway, "acme");
      try {
        const { pid } = JSON.parse(text(await a.call("whoami")));
        assert.ok(processAlive(pid));
        assert.equal(gateway.kernel.proxy.status()[0]!.instances!.length, 1);
        // The cap: a second session gets a clear refusal while the first one's instance runs.
        await assert.rejects(b.call("whoami"), /already runs 1 instances \(max_instances/);
        await (a.client.transport as StreamableHTTPClientTransport).terminateSession();
        await a.client.close();
        await eventually(() => !processAlive(pid), "the session's upstream process to exit");
        assert.equal(gateway.kernel.proxy.status()[0]!.instances!.length, 0);
        // Room again: the other session now gets its own.
        const { pid: other } = JSON.parse(text(await b.call("whoami")));
        assert.notEqual(other, pid);
      } finally {
        await a.client.close();
        await b.client.close();
      }
    },
  );
});

Deno.test("Per-tenant env reaches only that tenant's instance; an unlisted tenant is refused", async () => {
  Deno.env.set("TI_ACME_SECRET", "acme-secret-value");
  Deno.env.set("TI_GLOBEX_SECRET", "globex-secret-value");
  const tenants = `    scope: tenant
    tenants:
      acme:
        env: { SAMPLING_SECRET: "\${TI_ACME_SECRET}" }
      globex:
        env: { SAMPLING_SECRET: "\${TI_GLOBEX_SECRET}" }
`;
  try {
    await withGateway(samplingServer(tenants), async (gateway) => {
      const a = await caller(gateway, "acme");
      const b = await caller(gateway, "globex");
      const c = await caller(gateway, "initech");
      try {
        assert.equal(JSON.parse(text(await a.call("whoami"))).secret, "acme-secret-value");
        assert.equal(JSON.parse(text(await b.call("whoami"))).secret, "globex-secret-value");
        await assert.rejects(c.call("whoami"), (error: Error) => {
          assert.match(error.message, /none for tenant "initech"; add tenants\.initech/);
          assert.doesNotMatch(error.message, /secret-value/);
          return true;
        });
      } finally {
        await Promise.all([a, b, c].map((x) => x.client.close()));
      }
    });
  } finally {
    Deno.env.delete("TI_ACME_SECRET");
    Deno.env.delete("TI_GLOBEX_SECRET");
  }
});

Deno.test("auth: passthrough forwards each caller's own bearer token to a real HTTP upstream, and nothing else", async () => {
  const echo = startHeaderEchoServer();
  const fleet = `proxy_servers:
  - id: echo
    url: ${echo.url}
    scope: session
    auth: passthrough
    passthrough_audience: agent33-test-upstream
    headers: { X-Static: from-the-fleet }
`;
  try {
    await withGateway(fleet, async (gateway) => {
      const a = await caller(gateway, "acme", { "X-Client-Secret": "acme-private-header" });
      const b = await caller(gateway, "globex");
      try {
        const seen = async (c: Caller) => {
          const result = await c.client.callTool({ name: "echo__headers", arguments: {} });
          return JSON.parse(text(result as CallToolResult)) as Record<string, string>;
        };
        const [ha, hb] = [await seen(a), await seen(b)];
        assert.equal(ha.authorization, `Bearer ${a.token}`);
        assert.equal(hb.authorization, `Bearer ${b.token}`);
        assert.notEqual(ha.authorization, hb.authorization);
        assert.equal(ha["x-static"], "from-the-fleet");
        // Only the bearer crosses: no other header of the caller's request.
        assert.equal(ha["x-client-secret"], undefined);
        assert.ok(!JSON.stringify(ha).includes("acme-private-header"));
        // The token itself is never logged.
        assert.ok(!gateway.logs.some((line) => line.includes(a.token)));
      } finally {
        await a.client.close();
        await b.client.close();
      }
    });
  } finally {
    await echo.close();
  }
});

Deno.test("A shared Streamable HTTP upstream's sampling and logs reach exactly the call whose stream they came on", async () => {
  const upstream = startSamplingHttpServer();
  try {
    await withGateway(
      `proxy_servers:\n  - id: remote\n    url: ${upstream.url}\n`,
      async (gateway) => {
        const a = await caller(gateway, "acme");
        const b = await caller(gateway, "globex");
        try {
          const [ra, rb] = await Promise.all([
            a.call("remote__ask", { marker: "ALPHA", wait_for: 2 }),
            b.call("remote__ask", { marker: "BRAVO", wait_for: 2 }),
          ]);
          assert.equal(text(ra), "answer for ALPHA: sampled by acme");
          assert.equal(text(rb), "answer for BRAVO: sampled by globex");
          await eventually(
            () => a.received.length === 2 && b.received.length === 2,
            "each tenant's log line and sampling request",
          );
          assert.ok(a.received.every((r) => r.includes("ALPHA") && !r.includes("BRAVO")));
          assert.ok(b.received.every((r) => r.includes("BRAVO") && !r.includes("ALPHA")));
          // The gateway's marker stays inside the gateway.
          assert.ok([...a.received, ...b.received].every((r) => !r.includes("agent33.dev")));
        } finally {
          await a.client.close();
          await b.client.close();
        }
      },
    );
  } finally {
    await upstream.close();
  }
});
