import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { SignJWT } from "jose";
import { APPROVAL_TOKEN_META_KEY } from "../../core/governance/tool_governance.ts";
import { openApiDocument } from "../../core/operator/openapi.ts";
import { faultServer, writeFleet } from "../support/fleet.ts";
import {
  connectHttp,
  initializeRequest,
  mcpHeaders,
  startGateway,
  type TestGateway,
} from "../support/gateway.ts";

const SECRET = "a-secret-of-at-least-thirty-two-bytes!!";

/** Starts a gateway whose bridge fails the test if any request reaches it. */
async function guardedGateway(env: Record<string, string> = {}) {
  const gateway = await startGateway({ MCP_AUTH_JWT_SECRET: SECRET, ...env });
  const reached: string[] = [];
  gateway.kernel.bridge.serve = (_transport, session) => {
    reached.push(session.transport);
    throw new Error("the bridge must not be reached by a refused request");
  };
  return { gateway, reached };
}

function jwt(claims: Record<string, unknown>, secret = SECRET, exp: string | number = "5m") {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setIssuedAt()
    .setExpirationTime(exp)
    .sign(new TextEncoder().encode(secret));
}

function initialize(gateway: TestGateway, headers: Record<string, string>) {
  return fetch(`${gateway.url}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify(initializeRequest("2025-11-25")),
  });
}

/** Sends a raw HTTP/1.1 request so the Host header can be anything. */
async function rawRequest(url: string, host: string, token: string): Promise<string> {
  const { port } = new URL(url);
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: Number(port) });
  try {
    const body = JSON.stringify(initializeRequest("2025-11-25"));
    const request = [
      "POST /mcp HTTP/1.1",
      `Host: ${host}`,
      `Authorization: Bearer ${token}`,
      "Content-Type: application/json",
      "Accept: application/json, text/event-stream",
      `Content-Length: ${body.length}`,
      "Connection: close",
      "",
      body,
    ].join("\r\n");
    await conn.write(new TextEncoder().encode(request));
    const chunks: Uint8Array[] = [];
    const buffer = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buffer);
      if (n === null) break;
      chunks.push(buffer.slice(0, n));
      if (new TextDecoder().decode(chunks.at(-1)).includes("\r\n\r\n")) break;
    }
    return new TextDecoder().decode(chunks[0]);
  } finally {
    conn.close();
  }
}

const refusals: [string, (g: TestGateway) => Promise<Response>, number, RegExp][] = [
  [
    "no token",
    (g) => {
      const { Authorization: _, ...headers } = mcpHeaders("");
      return initialize(g, headers);
    },
    401,
    /missing/i,
  ],
  ["a wrong token", (g) => initialize(g, mcpHeaders("wrong-token")), 401, /unknown token/i],
  [
    "a non-Bearer scheme",
    (g) => initialize(g, { ...mcpHeaders(""), Authorization: "Basic dTpw" }),
    401,
    /bearer/i,
  ],
  [
    "a forged JWT",
    async (g) =>
      initialize(
        g,
        mcpHeaders(await jwt({ tenant: "acme" }, "another-secret-that-is-long-enough!!")),
      ),
    401,
    /signature|verif/i,
  ],
  [
    "an expired JWT",
    async (g) =>
      initialize(
        g,
        mcpHeaders(await jwt({ tenant: "acme" }, SECRET, Math.floor(Date.now() / 1000) - 60)),
      ),
    401,
    /expired/i,
  ],
  [
    "a JWT without exp",
    async (g) =>
      initialize(
        g,
        mcpHeaders(
          await new SignJWT({ tenant: "acme", sub: "alice", scope: "mcp" })
            .setProtectedHeader({ alg: "HS256" })
            .setIssuedAt()
            .sign(new TextEncoder().encode(SECRET)),
        ),
      ),
    401,
    /no "exp" claim/,
  ],
  [
    "a token without scope mcp on the MCP endpoint",
    async (g) => initialize(g, mcpHeaders(await jwt({ tenant: "acme", scope: "operator" }))),
    403,
    /lacks scope admin or mcp, which the MCP endpoint \/mcp needs/,
  ],
  [
    "a wrong Origin",
    (g) => initialize(g, mcpHeaders(g.token, { Origin: "https://evil.example" })),
    403,
    /origin/i,
  ],
  [
    "an Origin on another localhost port",
    (g) =>
      initialize(
        g,
        mcpHeaders(g.token, { Origin: `http://localhost:${Number(new URL(g.url).port) + 1}` }),
      ),
    403,
    /origin/i,
  ],
];

for (const [what, send, status, message] of refusals) {
  Deno.test(`HTTP auth refuses ${what} before the bridge`, async () => {
    const { gateway, reached } = await guardedGateway();
    try {
      const response = await send(gateway);
      assert.equal(response.status, status);
      const body = await response.json();
      assert.match(body.error.message, message);
      if (status === 401) {
        assert.match(response.headers.get("www-authenticate") ?? "", /^Bearer realm="agent33"/);
      }
      assert.deepEqual(reached, []);
    } finally {
      await gateway.stop();
    }
  });
}

Deno.test("HTTP auth refuses a wrong Host header before the bridge (DNS rebinding)", async () => {
  const { gateway, reached } = await guardedGateway();
  try {
    const head = await rawRequest(gateway.url, "evil.example", gateway.token);
    assert.match(head, /^HTTP\/1\.1 403/);
    assert.deepEqual(reached, []);
    const good = await rawRequest(gateway.url, `localhost:${new URL(gateway.url).port}`, "wrong");
    assert.match(good, /^HTTP\/1\.1 401/, "a localhost Host passes the Host check");
  } finally {
    await gateway.stop();
  }
});

Deno.test("HTTP auth resolves a valid JWT to its tenant, scopes and subject", async () => {
  const gateway = await startGateway({ MCP_AUTH_JWT_SECRET: SECRET });
  try {
    const seen: unknown[] = [];
    gateway.kernel.tools.register({
      name: "whoami",
      description: "Echoes the caller",
      inputSchema: { type: "object" },
      handler: (_args, ctx) => {
        seen.push(ctx.auth);
        return Promise.resolve({ content: [] });
      },
    });
    const token = await jwt({ tenant: "acme", scope: "mcp operator", sub: "ci-bot" });
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import(
      "@modelcontextprotocol/sdk/client/streamableHttp.js"
    );
    const client = new Client({ name: "jwt", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    await client.callTool({ name: "whoami", arguments: {} });
    await client.close();
    assert.deepEqual(seen, [{
      tenant: "acme",
      scopes: ["mcp", "operator"],
      subject: "ci-bot",
      principal: '["jwt","secret","","ci-bot"]',
      kind: "jwt",
      audience: [],
    }]);
  } finally {
    await gateway.stop();
  }
});

Deno.test("A Streamable HTTP session cannot be used with another caller's credentials", async () => {
  const gateway = await startGateway({
    MCP_AUTH_JWT_SECRET: SECRET,
    MCP_HTTP_RESPONSE_MODE: "json",
  });
  try {
    const alice = await jwt({ tenant: "acme", sub: "alice", scope: "mcp" });
    const mallory = await jwt({ tenant: "acme", sub: "mallory", scope: "mcp" });
    const opened = await initialize(gateway, mcpHeaders(alice));
    const session = opened.headers.get("mcp-session-id")!;
    await opened.body?.cancel();
    const hijack = await fetch(`${gateway.url}/mcp`, {
      method: "POST",
      headers: mcpHeaders(mallory, {
        "Mcp-Session-Id": session,
        "Mcp-Protocol-Version": "2025-11-25",
      }),
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    assert.equal(hijack.status, 403);
    assert.match((await hijack.json()).error.message, /another caller/);
  } finally {
    await gateway.stop();
  }
});

Deno.test("a JWT whose sub names the static token cannot use the static token's sessions (Streamable HTTP, SSE)", async () => {
  const gateway = await startGateway({
    MCP_AUTH_JWT_SECRET: SECRET,
    MCP_HTTP_RESPONSE_MODE: "json",
  });
  try {
    const impostor = await jwt({ tenant: "default", sub: "static-token", scope: "mcp" });
    const opened = await initialize(gateway, mcpHeaders(gateway.token));
    const session = opened.headers.get("mcp-session-id")!;
    await opened.body?.cancel();
    const list = (token: string) =>
      fetch(`${gateway.url}/mcp`, {
        method: "POST",
        headers: mcpHeaders(token, {
          "Mcp-Session-Id": session,
          "Mcp-Protocol-Version": "2025-11-25",
        }),
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
      });
    const hijack = await list(impostor);
    assert.equal(hijack.status, 403);
    assert.match((await hijack.json()).error.message, /another caller/);
    const own = await list(gateway.token);
    assert.equal(own.status, 200, "the session is still its opener's");
    await own.body?.cancel();

    const sse = await fetch(`${gateway.url}/sse`, {
      headers: { Authorization: `Bearer ${gateway.token}`, Accept: "text/event-stream" },
    });
    const reader = sse.body!.pipeThrough(new TextDecoderStream()).getReader();
    let head = "";
    while (!/sessionId=[\w-]+/.test(head)) head += (await reader.read()).value ?? "";
    const messages = `${gateway.url}${/data: (\/messages\?sessionId=[\w-]+)/.exec(head)![1]}`;
    const posted = await fetch(messages, {
      method: "POST",
      headers: { Authorization: `Bearer ${impostor}`, "Content-Type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    assert.equal(posted.status, 403);
    assert.match(JSON.stringify(await posted.json()), /belongs to another caller/);
    await reader.cancel();
  } finally {
    await gateway.stop();
  }
});

// ---------------------------------------------------------------------------------------------
// Approvals a caller cannot grant itself

const DESTRUCTIVE_POLICY = `
tenants:
  "*":
    effects:
      "slow__*": destructive
    approval: [destructive]
`;

/** A gateway over the fault fixture whose `slow` tool needs approval, with JWTs accepted. */
async function withApprovalGateway(
  fn: (gateway: TestGateway) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  const fleet = await writeFleet(`proxy_servers:${faultServer("slow")}`);
  await Deno.writeTextFile(`${fleet.dir}/policy.yaml`, DESTRUCTIVE_POLICY);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: `${fleet.dir}/policy.yaml`,
    MCP_AUTH_JWT_SECRET: SECRET,
    ...env,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway);
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
}

/** Calls `slow__slow`, which must need approval; returns the approval request's id. */
async function requestApproval(client: Client, ms: number): Promise<string> {
  const refused = await client.callTool({ name: "slow__slow", arguments: { ms } }).then(
    () => assert.fail("slow__slow must need approval"),
    (e: McpError) => e,
  );
  assert.equal((refused.data as { code: string }).code, "approval_required");
  return (refused.data as { request: { id: string } }).request.id;
}

function decide(gateway: TestGateway, id: string, action: "approve" | "deny", token: string) {
  return fetch(`${gateway.url}/v1/approvals/${id}/${action}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: "{}",
  });
}

async function assertSelfApproval(response: Response, what: string): Promise<void> {
  assert.equal(response.status, 403, what);
  const body = await response.json();
  assert.equal(body.error.code, "self_approval", what);
  assert.match(body.error.message, /asked for approval request .* cannot (approve|deny) it/, what);
}

Deno.test("The requester cannot approve or deny its own request through /v1/approvals, even holding scope admin", async () => {
  await withApprovalGateway(async (gateway) => {
    const client = await connectHttp(gateway); // static token: scope admin, identity static-token
    try {
      const id = await requestApproval(client, 1);
      await assertSelfApproval(await decide(gateway, id, "approve", gateway.token), "approve");
      await assertSelfApproval(await decide(gateway, id, "deny", gateway.token), "deny");
      const listed = await (await fetch(`${gateway.url}/v1/approvals/${id}`, {
        headers: { Authorization: `Bearer ${gateway.adminToken}` },
      })).json();
      assert.equal(listed.status, "pending");
      assert.equal(listed.subject, "static-token");
    } finally {
      await client.close();
    }
  });
});

Deno.test("A different token with the requester's JWT sub cannot approve; a different approver can, and the requester's retry with the token works", async () => {
  await withApprovalGateway(async (gateway) => {
    const alice = await jwt({ tenant: "acme", sub: "alice", scope: "mcp approver" });
    const client = await clientWith(gateway, alice);
    try {
      const id = await requestApproval(client, 2);
      await assertSelfApproval(await decide(gateway, id, "approve", alice), "the same token");
      // Another token, other scopes, other tenant even: the same person.
      const aliceAgain = await jwt({ tenant: "ops", sub: "alice", scope: "approver admin" });
      assert.notEqual(aliceAgain, alice);
      await assertSelfApproval(await decide(gateway, id, "approve", aliceAgain), "the same sub");

      const bob = await jwt({ tenant: "acme", sub: "bob", scope: "approver" });
      const approved = await decide(gateway, id, "approve", bob);
      assert.equal(approved.status, 200);
      await approved.body?.cancel();
      const mine = await (await fetch(`${gateway.url}/v1/approvals/${id}`, {
        headers: { Authorization: `Bearer ${alice}` },
      })).json();
      assert.equal(mine.status, "approved");
      const done = await client.callTool({
        name: "slow__slow",
        arguments: { ms: 2 },
        _meta: { [APPROVAL_TOKEN_META_KEY]: mine.token },
      });
      assert.deepEqual(done.content, [{ type: "text", text: "slept 2" }]);
    } finally {
      await client.close();
    }
  });
});

/** An SDK client over Streamable HTTP with `token`. */
async function clientWith(gateway: TestGateway, token: string): Promise<Client> {
  const client = new Client({ name: "e2e", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/**
 * With a bound of 2 set by `env`: the `flooder` claims' two pending approvals fill it, its third
 * is refused `approval_queue_full` with `message`, and the `other` claims' caller still files one.
 */
async function pendingBound(
  env: Record<string, string>,
  flooder: Record<string, unknown>,
  other: Record<string, unknown>,
  message: RegExp,
): Promise<void> {
  await withApprovalGateway(async (gateway) => {
    const first = await clientWith(gateway, await jwt({ ...flooder, scope: "mcp" }));
    const second = await clientWith(gateway, await jwt({ ...other, scope: "mcp" }));
    try {
      await requestApproval(first, 1);
      await requestApproval(first, 2);
      const full = await first.callTool({ name: "slow__slow", arguments: { ms: 3 } }).then(
        () => assert.fail("a third pending request must be refused"),
        (e: McpError) => e,
      );
      assert.equal((full.data as { code: string }).code, "approval_queue_full");
      assert.match(full.message, message);
      await requestApproval(second, 3);
    } finally {
      await first.close();
      await second.close();
    }
  }, env);
}

Deno.test("One tenant's pending approvals are bounded (MCP_MAX_PENDING_APPROVALS_PER_TENANT); another tenant still gets its own", async () => {
  await pendingBound(
    { MCP_MAX_PENDING_APPROVALS_PER_TENANT: "2" },
    { tenant: "acme", sub: "a" },
    { tenant: "globex", sub: "g" },
    /Tenant "acme" already has 2 .*MCP_MAX_PENDING_APPROVALS_PER_TENANT/,
  );
});

Deno.test("One caller cannot fill its tenant's pending approvals (MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL); another caller of the tenant still gets its own", async () => {
  await pendingBound(
    { MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL: "2" },
    { tenant: "acme", sub: "a" },
    { tenant: "acme", sub: "b" },
    /"a" of tenant "acme" already has 2 .*MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL/,
  );
});

// ---------------------------------------------------------------------------------------------
// The two tokens of `deno task start`

const ROOT = new URL("../../", import.meta.url).pathname;

/** `main.ts serve` over HTTP with no credential configured; `stderr` is what it printed. */
function spawnUnconfigured(
  args: string[] = [],
  env: Record<string, string> = {},
): { child: Deno.ChildProcess; stderr: () => string; done: Promise<string> } {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${ROOT}main.ts`,
      "serve",
      "--transport",
      "http",
      "--port",
      "0",
      "--env-file",
      "/dev/null",
      ...args,
    ],
    cwd: ROOT,
    clearEnv: true,
    env: {
      NO_COLOR: "1",
      HOME: Deno.env.get("HOME") ?? "/tmp",
      PATH: Deno.env.get("PATH")!,
      ...env,
    },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let text = "";
  const done = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) text += chunk;
    return text;
  })();
  return { child, stderr: () => text, done };
}

Deno.test("deno task start prints a client token that holds mcp only: 403 on every admin route; the separate admin token works", async () => {
  const { child, stderr, done } = spawnUnconfigured();
  try {
    const deadline = Date.now() + 30_000;
    while (!/Try it:/.test(stderr())) {
      if (Date.now() > deadline) throw new Error(`no start-up printout: ${stderr()}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    const printed = stderr();
    const url = /listening on (http:\/\/\S+)/.exec(printed)![1]!;
    const client = /MCP clients \(\/mcp, \/sse\):\n\s+Authorization: Bearer (\S+)/.exec(printed)
      ?.[1];
    const admin = /Do not give it to clients:\n\s+Authorization: Bearer (\S+)/.exec(printed)?.[1];
    assert.ok(client && admin, printed);
    assert.notEqual(client, admin);

    // The client token is what MCP clients use.
    const sdk = new Client({ name: "start-token", version: "1.0.0" });
    await sdk.connect(
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${client}` } },
      }),
    );
    assert.ok((await sdk.listTools()).tools.some((t) => t.name === "system_status"));
    await sdk.close();

    // Every guarded operation of the route table, by the client token: 403 naming the scope.
    const paths = openApiDocument().paths as Record<
      string,
      Record<string, Record<string, unknown>>
    >;
    let guarded = 0;
    for (const [path, operations] of Object.entries(paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const scopes = operation["x-required-scopes"] as string[] | undefined;
        if (!scopes || scopes.includes("mcp")) continue;
        guarded++;
        const target = url + path.replace(/\{[^}]+\}/g, "nope");
        const send = (token: string) =>
          fetch(target, {
            method: method.toUpperCase(),
            headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
            ...(method === "get" ? {} : { body: "{}" }),
          });
        const refused = await send(client);
        assert.equal(refused.status, 403, `${method} ${path}`);
        assert.match((await refused.json()).error.message, /lacks scope/, `${method} ${path}`);
        if (method === "get") {
          const allowed = await send(admin);
          assert.ok(![401, 403].includes(allowed.status), `${method} ${path}: ${allowed.status}`);
          await allowed.body?.cancel();
        }
      }
    }
    assert.ok(guarded >= 25, `the route table has ${guarded} guarded operations`);
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await done;
  }
});

// ---------------------------------------------------------------------------------------------
// --no-auth and --no-auth-admin

Deno.test("--no-auth grants mcp only: MCP works, the admin API and approvals answer 403 naming --no-auth-admin", async () => {
  const gateway = await startGateway({}, { noAuth: true });
  try {
    const client = await connectHttp(gateway);
    assert.ok((await client.listTools()).tools.some((t) => t.name === "system_status"));
    await client.close();
    for (
      const [method, path] of [
        ["GET", "/v1/operator/status"],
        ["POST", "/v1/mcp/proxy/servers"],
        ["GET", "/v1/approvals"],
        ["POST", "/v1/approvals/x/approve"],
      ]
    ) {
      const answer = await fetch(`${gateway.url}${path}`, {
        method,
        headers: { "Content-Type": "application/json" },
        ...(method === "POST" ? { body: "{}" } : {}),
      });
      assert.equal(answer.status, 403, `${method} ${path}`);
      assert.match((await answer.json()).error.message, /--no-auth-admin/, `${method} ${path}`);
    }
  } finally {
    await gateway.stop();
  }
});

Deno.test("--no-auth --no-auth-admin also opens the admin API", async () => {
  const gateway = await startGateway({}, { noAuth: true, noAuthAdmin: true });
  try {
    const status = await fetch(`${gateway.url}/v1/operator/status`);
    assert.equal(status.status, 200);
    await status.body?.cancel();
    const client = await connectHttp(gateway);
    assert.ok((await client.listTools()).tools.length > 0);
    await client.close();
  } finally {
    await gateway.stop();
  }
});

// ---------------------------------------------------------------------------------------------
// JWT settings refused at start

for (
  const [what, env, message] of [
    [
      "a JWKS URL without an audience",
      { MCP_AUTH_JWKS_URL: "https://idp.example/.well-known/jwks.json" },
      /MCP_AUTH_JWKS_URL is set without MCP_AUTH_JWT_AUDIENCE/,
    ],
    [
      "an HS256 secret of 16 bytes",
      { MCP_AUTH_JWT_SECRET: "0123456789abcdef" },
      /MCP_AUTH_JWT_SECRET is 16 bytes; an HS256 secret needs at least 32 bytes/,
    ],
  ] as const
) {
  Deno.test(`The gateway refuses to start with ${what}, saying why`, async () => {
    const { child, done } = spawnUnconfigured([], env);
    const status = await child.status;
    const stderr = await done;
    assert.equal(status.code, 1, stderr);
    assert.match(stderr, /Cannot start: /);
    assert.match(stderr, message);
    assert.doesNotMatch(stderr, /listening on/);
  });
}
