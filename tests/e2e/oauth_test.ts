/**
 * The gateway as an OAuth 2.1 protected resource (MCP authorization spec), against a real OpenID
 * provider (oidc-provider) on 127.0.0.1: discovery from the gateway's 401, client-credentials
 * tokens bound to the gateway's resource URL, and what is refused.
 */
import assert from "node:assert/strict";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { APPROVAL_TOKEN_META_KEY } from "../../core/governance/tool_governance.ts";
import type { Clock } from "../../core/support/clock.ts";
import { systemClock } from "../../core/support/clock.ts";
import {
  initializeRequest,
  mcpHeaders,
  startGateway,
  type TestGateway,
} from "../support/gateway.ts";
import { faultServer, writeFleet } from "../support/fleet.ts";
import { hasNpx, inspectorCli } from "../support/inspector.ts";
import {
  ACCESS_TOKEN_TTL,
  startProvider,
  type TestClient,
  type TestProvider,
} from "../support/oidc_provider.ts";

const AGENT: TestClient = {
  id: "agent",
  secret: "agent-secret",
  scope: "mcp gw.tools",
  tenant: "acme",
};
const OPERATOR: TestClient = { id: "ops", secret: "ops-secret", scope: "operator", tenant: "acme" };
const NO_TENANT: TestClient = { id: "stray", secret: "stray-secret", scope: "mcp" };
/** A client of the provider whose id (its tokens' `sub`) is the name of the gateway's static token. */
const NAMESAKE: TestClient = {
  id: "static-token",
  secret: "namesake-secret",
  scope: "mcp",
  tenant: "default",
};
/** A client of the provider whose id is the name of the gateway's admin token. */
const ADMIN_NAMESAKE: TestClient = {
  id: "admin-token",
  secret: "admin-namesake-secret",
  scope: "mcp",
  tenant: "default",
};

/** A port nothing listens on right now, so the gateway's resource URL is known before it starts. */
function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr;
  listener.close();
  return port;
}

interface Setup {
  provider: TestProvider;
  gateway: TestGateway;
  resource: string;
  /** Moves the gateway's clock ahead of real time by `ms`. */
  skew(ms: number): void;
  stop(): Promise<void>;
}

async function setup(env: Record<string, string> = {}): Promise<Setup> {
  const provider = await startProvider([AGENT, OPERATOR, NO_TENANT, NAMESAKE, ADMIN_NAMESAKE]);
  const port = freePort();
  let offset = 0;
  const clock: Clock = { now: () => Date.now() + offset, setTimeout: systemClock.setTimeout };
  try {
    const gateway = await startGateway({
      MCP_SERVER_PORT: String(port),
      MCP_AUTH_OAUTH_ISSUER: provider.issuer,
      // Key rotation is picked up on the next unknown kid, not 30 s after the last fetch.
      MCP_AUTH_JWKS_COOLDOWN: "0",
      ...env,
    }, { clock });
    gateway.kernel.tools.register({
      name: "whoami",
      description: "Answers with the caller the gateway resolved",
      inputSchema: { type: "object" },
      handler: (_args, ctx) =>
        Promise.resolve({ content: [{ type: "text", text: JSON.stringify(ctx.auth) }] }),
    });
    return {
      provider,
      gateway,
      resource: `http://127.0.0.1:${port}/mcp`,
      skew: (ms) => void (offset = ms),
      stop: async () => {
        await gateway.stop();
        await provider.stop();
      },
    };
  } catch (e) {
    await provider.stop();
    throw e;
  }
}

function initialize(s: Setup, headers: Record<string, string>) {
  return fetch(s.resource, {
    method: "POST",
    headers,
    body: JSON.stringify(initializeRequest("2025-11-25")),
  });
}

/** The caller the gateway resolved: tenant, scopes, identity (and, with `all`, every field). */
async function whoami(client: Client, all = false): Promise<Record<string, unknown>> {
  const result = await client.callTool({ name: "whoami", arguments: {} });
  const [first] = result.content as { type: string; text: string }[];
  const auth = JSON.parse(first!.text);
  return all ? auth : { tenant: auth.tenant, scopes: auth.scopes, subject: auth.subject };
}

Deno.test("OAuth: the gateway publishes RFC 9728 metadata naming its identity provider", async () => {
  const s = await setup();
  try {
    const origin = new URL(s.resource).origin;
    const suffixed = await fetch(`${origin}/.well-known/oauth-protected-resource/mcp`);
    assert.equal(suffixed.status, 200);
    const document = await suffixed.json();
    assert.deepEqual(document, {
      resource: s.resource,
      authorization_servers: [s.provider.issuer],
      scopes_supported: ["mcp"],
      bearer_methods_supported: ["header"],
      resource_name: "AGENT-33 MCP gateway",
    });
    const bare = await fetch(`${origin}/.well-known/oauth-protected-resource`);
    assert.deepEqual(await bare.json(), document);
    // The issuer it names really is an authorization server.
    const issuer = await fetch(`${s.provider.issuer}/.well-known/openid-configuration`);
    assert.equal((await issuer.json()).issuer, document.authorization_servers[0]);
  } finally {
    await s.stop();
  }
});

Deno.test("OAuth: a 401 without a token points to the metadata and the scope to ask for, naming no error", async () => {
  const s = await setup();
  try {
    const { Authorization: _, ...headers } = mcpHeaders("");
    const refused = await initialize(s, headers);
    assert.equal(refused.status, 401);
    const metadata = `${new URL(s.resource).origin}/.well-known/oauth-protected-resource/mcp`;
    assert.equal(
      refused.headers.get("www-authenticate"),
      `Bearer realm="agent33", scope="mcp", resource_metadata="${metadata}"`,
    );
    const body = await refused.json();
    assert.match(body.error.message, new RegExp(`from ${s.provider.issuer} for the resource`));
  } finally {
    await s.stop();
  }
});

Deno.test("OAuth: an SDK client with client credentials finds the provider through the gateway and calls a tool", async () => {
  const s = await setup();
  try {
    const client = new Client({ name: "cc", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(s.resource), {
        authProvider: new ClientCredentialsProvider({
          clientId: AGENT.id,
          clientSecret: AGENT.secret,
          scope: "mcp",
          expectedIssuer: s.provider.issuer,
        }),
      }),
    );
    try {
      assert.deepEqual(await whoami(client, true), {
        tenant: "acme",
        scopes: ["mcp"],
        subject: "agent",
        principal: JSON.stringify(["jwt", "keys", s.provider.issuer, "agent"]),
        kind: "jwt",
        audience: [s.resource],
      });
    } finally {
      await client.close();
    }
    const keys = `keys of ${s.provider.issuer} come from ${s.provider.issuer}/jwks`;
    assert.ok(s.gateway.logs.some((line) => line.includes(keys)), "the operator's log says where");
  } finally {
    await s.stop();
  }
});

Deno.test("OAuth: a provider's token whose sub names the static token is another caller: the static token's session refuses it", async () => {
  const s = await setup();
  try {
    const token = await s.provider.token(NAMESAKE, { resource: s.resource, scope: "mcp" });
    const opened = await initialize(s, mcpHeaders(s.gateway.token));
    const session = opened.headers.get("mcp-session-id")!;
    await opened.body?.cancel();
    const client = new Client({ name: "namesake", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(s.resource), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    try {
      const seen = await whoami(client, true);
      assert.equal(seen.subject, "static-token", "shown by its name");
      assert.equal(
        seen.principal,
        JSON.stringify(["jwt", "keys", s.provider.issuer, "static-token"]),
      );
    } finally {
      await client.close();
    }
    const hijack = await fetch(s.resource, {
      method: "POST",
      headers: mcpHeaders(token, {
        "Mcp-Session-Id": session,
        "Mcp-Protocol-Version": "2025-11-25",
      }),
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }),
    });
    assert.equal(hijack.status, 403);
    assert.match(await hijack.text(), /belongs to another caller/);
  } finally {
    await s.stop();
  }
});

Deno.test("OAuth: a provider's token whose sub names a static token is another caller for approvals: it cannot fetch that token's approval, and the admin token may decide its requests", async () => {
  const fleet = await writeFleet(`proxy_servers:${faultServer("slow")}`);
  await Deno.writeTextFile(
    `${fleet.dir}/policy.yaml`,
    'tenants:\n  "*":\n    effects: { "slow__*": destructive }\n    approval: [destructive]\n',
  );
  const s = await setup({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: `${fleet.dir}/policy.yaml`,
    MCP_SERVER_AUTH_SCOPES: "mcp",
  });
  const connect = async (token: string) => {
    const client = new Client({ name: "e2e", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(s.resource), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    return client;
  };
  const ask = async (client: Client, ms: number) => {
    const refused = await client.callTool({ name: "slow__slow", arguments: { ms } }).then(
      () => assert.fail("slow__slow must need approval"),
      (e: McpError) => e,
    );
    return (refused.data as { request: { id: string } }).request.id;
  };
  const api = (path: string, token: string, method = "GET") =>
    fetch(`${s.gateway.url}/v1/approvals/${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      ...(method === "POST" ? { body: "{}" } : {}),
    });
  const owner = await connect(s.gateway.token);
  const namesakeToken = await s.provider.token(NAMESAKE, { resource: s.resource, scope: "mcp" });
  const adminNamesake = await connect(
    await s.provider.token(ADMIN_NAMESAKE, { resource: s.resource, scope: "mcp" }),
  );
  try {
    await s.gateway.kernel.fleetStarted;
    const id = await ask(owner, 7);
    const approved = await api(`${id}/approve`, s.gateway.adminToken, "POST");
    assert.equal(approved.status, 200);
    await approved.body?.cancel();
    const stolen = await api(id, namesakeToken);
    assert.equal(stolen.status, 404, "the approval of static-token is not the namesake's to see");
    await stolen.body?.cancel();
    const mine = await (await api(id, s.gateway.token)).json();
    const done = await owner.callTool({
      name: "slow__slow",
      arguments: { ms: 7 },
      _meta: { [APPROVAL_TOKEN_META_KEY]: mine.token },
    });
    assert.deepEqual(done.content, [{ type: "text", text: "slept 7" }]);

    // The operator is not the requester of what a namesake of its token asked for.
    const theirs = await ask(adminNamesake, 8);
    const decided = await api(`${theirs}/approve`, s.gateway.adminToken, "POST");
    assert.equal(decided.status, 200, "no self_approval: the admin token did not ask");
    await decided.body?.cancel();
  } finally {
    await owner.close();
    await adminNamesake.close();
    await s.stop();
    await fleet.remove();
  }
});

Deno.test("OAuth: a token issued for another resource is refused with 401 invalid_token", async () => {
  const s = await setup();
  try {
    const token = await s.provider.token(AGENT, {
      resource: "http://127.0.0.1:1/other-service",
      scope: "mcp",
    });
    const refused = await initialize(s, mcpHeaders(token));
    assert.equal(refused.status, 401);
    const header = refused.headers.get("www-authenticate") ?? "";
    assert.match(header, /error="invalid_token"/);
    assert.match(header, /\\"aud\\" claim/);
    assert.match(header, /resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\//);
    await refused.body?.cancel();
  } finally {
    await s.stop();
  }
});

Deno.test("OAuth: an expired token is refused with 401 invalid_token", async () => {
  const s = await setup();
  try {
    const token = await s.provider.token(AGENT, { resource: s.resource, scope: "mcp" });
    // The gateway's clock runs past exp plus the 30 s tolerance: no waiting for real expiry.
    s.skew((ACCESS_TOKEN_TTL + 31) * 1000);
    const refused = await initialize(s, mcpHeaders(token));
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get("www-authenticate") ?? "", /error="invalid_token".*expired/);
    await refused.body?.cancel();
    s.skew(0);
    const accepted = await initialize(s, mcpHeaders(token));
    assert.equal(accepted.status, 200, "the same token before its exp is accepted");
    await accepted.body?.cancel();
  } finally {
    await s.stop();
  }
});

Deno.test("OAuth: a rotated signing key is picked up without restarting the gateway", async () => {
  const s = await setup();
  try {
    const before = await s.provider.token(AGENT, { resource: s.resource, scope: "mcp" });
    const first = await initialize(s, mcpHeaders(before));
    assert.equal(first.status, 200);
    await first.body?.cancel();
    const oldKid = s.provider.kid;
    const newKid = await s.provider.rotateKeys();
    assert.notEqual(newKid, oldKid);
    const after = await s.provider.token(AGENT, { resource: s.resource, scope: "mcp" });
    const header = JSON.parse(atob(after.split(".")[0]!.replace(/-/g, "+").replace(/_/g, "/")));
    assert.equal(header.kid, newKid, "the new token is signed with the new key");
    const second = await initialize(s, mcpHeaders(after));
    assert.equal(second.status, 200);
    await second.body?.cancel();
  } finally {
    await s.stop();
  }
});

Deno.test("OAuth: a token without the mcp scope gets 403 insufficient_scope naming the scope", async () => {
  const s = await setup();
  try {
    const token = await s.provider.token(OPERATOR, { resource: s.resource, scope: "operator" });
    const refused = await initialize(s, mcpHeaders(token));
    assert.equal(refused.status, 403);
    const header = refused.headers.get("www-authenticate") ?? "";
    assert.match(header, /error="insufficient_scope"/);
    assert.match(header, /scope="mcp"/);
    assert.match(header, /resource_metadata="/);
    await refused.body?.cancel();
  } finally {
    await s.stop();
  }
});

Deno.test("OAuth: MCP_AUTH_OAUTH_SCOPE_MAP maps the provider's scope names to the gateway's", async () => {
  const s = await setup({ MCP_AUTH_OAUTH_SCOPE_MAP: "gw.tools=mcp,admin=admin" });
  try {
    const origin = new URL(s.resource).origin;
    const document = await (await fetch(`${origin}/.well-known/oauth-protected-resource`)).json();
    assert.deepEqual(document.scopes_supported, ["gw.tools"], "only what /mcp needs");

    // The provider's own `mcp` scope means nothing here; the 403 names the one to ask for.
    const unmapped = await s.provider.token(AGENT, { resource: s.resource, scope: "mcp" });
    const refused = await initialize(s, mcpHeaders(unmapped));
    assert.equal(refused.status, 403);
    assert.match(refused.headers.get("www-authenticate") ?? "", /scope="gw\.tools"/);
    await refused.body?.cancel();

    const client = new Client({ name: "mapped", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(s.resource), {
        authProvider: new ClientCredentialsProvider({
          clientId: AGENT.id,
          clientSecret: AGENT.secret,
          scope: "gw.tools",
          expectedIssuer: s.provider.issuer,
        }),
      }),
    );
    try {
      assert.deepEqual(await whoami(client), { tenant: "acme", scopes: ["mcp"], subject: "agent" });
    } finally {
      await client.close();
    }
  } finally {
    await s.stop();
  }
});

Deno.test("OAuth: MCP_AUTH_OAUTH_AUDIENCE accepts the audience a provider assigns instead of the URL", async () => {
  const s = await setup({ MCP_AUTH_OAUTH_AUDIENCE: "api://agent33" });
  try {
    const token = await s.provider.token(AGENT, { resource: "api://agent33", scope: "mcp" });
    const accepted = await initialize(s, mcpHeaders(token));
    assert.equal(accepted.status, 200);
    await accepted.body?.cancel();
    const url = await s.provider.token(AGENT, { resource: s.resource, scope: "mcp" });
    const refused = await initialize(s, mcpHeaders(url));
    assert.equal(refused.status, 401, "the audience list replaces the resource URL");
    await refused.body?.cancel();
  } finally {
    await s.stop();
  }
});

Deno.test("OAuth: a token without the tenant claim is refused unless a default tenant is set", async () => {
  const strict = await setup();
  try {
    const token = await strict.provider.token(NO_TENANT, {
      resource: strict.resource,
      scope: "mcp",
    });
    const refused = await initialize(strict, mcpHeaders(token));
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get("www-authenticate") ?? "", /no \\"tenant\\" claim/);
    await refused.body?.cancel();
  } finally {
    await strict.stop();
  }
  const lenient = await setup({ MCP_AUTH_OAUTH_TENANT_DEFAULT: "guests" });
  try {
    const client = new Client({ name: "stray", version: "1" });
    const token = await lenient.provider.token(NO_TENANT, {
      resource: lenient.resource,
      scope: "mcp",
    });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(lenient.resource), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    try {
      assert.deepEqual(await whoami(client), {
        tenant: "guests",
        scopes: ["mcp"],
        subject: "stray",
      });
    } finally {
      await client.close();
    }
  } finally {
    await lenient.stop();
  }
});

Deno.test({
  name: "OAuth: the Inspector CLI is told where to get a token, and lists the tools with one",
  ignore: !hasNpx(),
  fn: async () => {
    const s = await setup();
    try {
      const list = [s.resource, "--transport", "http", "--method", "tools/list"];
      const env = { MCP_INSPECTOR_SECRET_STORE: "memory" };
      // Without a TTY the Inspector cannot run a browser login; told not to, it shows the 401.
      const refused = await inspectorCli([...list, "--stored-auth-only"], { env });
      const said = refused.stdout + refused.stderr;
      assert.match(said, /auth_required/);
      assert.ok(said.includes(`get an access token from ${s.provider.issuer}`), said);
      assert.ok(said.includes(`for the resource ${s.resource}`), said);

      const token = await s.provider.token(AGENT, { resource: s.resource, scope: "mcp" });
      const listed = await inspectorCli([...list, "--header", `Authorization: Bearer ${token}`], {
        env,
      });
      assert.equal(listed.code, 0, listed.stderr.slice(-2000));
      const names = (JSON.parse(listed.stdout) as { tools: { name: string }[] }).tools.map((t) =>
        t.name
      );
      assert.ok(names.includes("whoami"), names.join(", "));
    } finally {
      await s.stop();
    }
  },
});
