/**
 * The admin API against a real gateway: scopes, fleet changes kept in the fleet file (comments
 * and all) and applied at once, reloads that refuse bad files, the MCP switch and redaction.
 */
import assert from "node:assert/strict";
import { eventually, faultServer, fixture, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";
import { JWT_SECRET, policyJwt } from "../support/policy_gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

/** The same entry as the JSON body of POST /v1/mcp/proxy/servers. */
function faultJson(id: string): Record<string, unknown> {
  return {
    id,
    command: ["deno", "run", "--config", DENO_JSON, fixture("upstreams/fault_server.ts")],
    sandbox: "deno",
    env: { FAULT: "none" },
    permissions: { env: ["FAULT"], read: true },
  };
}

function jwt(scope: string, sub = `${scope}-caller`): Promise<string> {
  return policyJwt("default", sub, scope);
}

interface Answer {
  status: number;
  // deno-lint-ignore no-explicit-any
  body: any;
  text: string;
}

/** One request; `token` null sends none. */
async function api(
  gateway: TestGateway,
  method: string,
  path: string,
  token: string | null = gateway.token,
  body?: unknown,
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, body: parsed, text };
}

async function withGateway(
  fleetYaml: string | undefined,
  fn: (gateway: TestGateway, fleetPath: string | undefined) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  const fleet = fleetYaml === undefined ? undefined : await writeFleet(fleetYaml);
  const gateway = await startGateway({
    MCP_AUTH_JWT_SECRET: JWT_SECRET,
    ...(fleet ? { MCP_PROXY_CONFIG_PATH: fleet.path } : {}),
    ...env,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway, fleet?.path);
  } finally {
    await gateway.stop();
    await fleet?.remove();
  }
}

/** Every admin route: method, path, and whether operators may use it. */
const ROUTES: [string, string, "operator" | "admin"][] = [
  ["GET", "/v1/mcp/status", "operator"],
  ["GET", "/v1/mcp/config", "operator"],
  ["POST", "/v1/mcp/enable", "admin"],
  ["POST", "/v1/mcp/disable", "admin"],
  ["POST", "/v1/mcp/reload", "admin"],
  ["GET", "/v1/mcp/proxy/servers", "operator"],
  ["POST", "/v1/mcp/proxy/servers", "admin"],
  ["GET", "/v1/mcp/proxy/servers/one", "operator"],
  ["DELETE", "/v1/mcp/proxy/servers/one", "admin"],
  ["POST", "/v1/mcp/proxy/servers/one/enable", "admin"],
  ["POST", "/v1/mcp/proxy/servers/one/disable", "admin"],
  ["POST", "/v1/mcp/proxy/servers/one/restart", "operator"],
  ["GET", "/v1/mcp/sync/status", "operator"],
  ["GET", "/v1/connectors", "operator"],
  ["GET", "/v1/connectors/one", "operator"],
  ["GET", "/v1/openapi.json", "operator"],
];

Deno.test("Every admin route answers 401 without credentials and 403 naming the scope it lacks", async () => {
  await withGateway(undefined, async (gateway) => {
    const mcp = await jwt("mcp");
    const operator = await jwt("operator all_tenants");
    for (const [method, path, who] of ROUTES) {
      const anonymous = await api(gateway, method, path, null);
      assert.equal(anonymous.status, 401, `${method} ${path} without a token`);
      const caller = await api(gateway, method, path, mcp);
      assert.equal(caller.status, 403, `${method} ${path} with scope mcp`);
      assert.match(
        caller.body.error.message,
        /"mcp-caller" lacks scope admin or operator|lacks scope admin,/,
      );
      assert.ok(caller.body.error.message.includes(`${method} ${path}`), caller.body.error.message);
      if (who === "admin") {
        const op = await api(gateway, method, path, operator);
        assert.equal(op.status, 403, `${method} ${path} with scope operator`);
        assert.match(op.body.error.message, /lacks scope admin, which/);
      }
    }
    const status = await api(gateway, "GET", "/v1/mcp/status", operator);
    assert.equal(status.status, 200, "operators may read");
  });
});

Deno.test("Without a fleet file, fleet changes answer 409 saying to set MCP_PROXY_CONFIG_PATH", async () => {
  await withGateway(undefined, async (gateway) => {
    const add = await api(gateway, "POST", "/v1/mcp/proxy/servers", gateway.token, faultJson("x"));
    assert.equal(add.status, 409);
    assert.equal(add.body.error.code, "no_fleet_file");
    assert.match(add.body.error.message, /MCP_PROXY_CONFIG_PATH/);
    const reload = await api(gateway, "POST", "/v1/mcp/reload");
    assert.equal(reload.status, 200);
    assert.equal(reload.body.fleet.status, "not_configured");
  });
});

Deno.test("A server added through the API keeps the file's comments, starts, and survives a gateway restart", async () => {
  const original = `# Upstreams of the test gateway: this comment must survive.
proxy_servers:${faultServer("one")}`;
  const fleet = await writeFleet(original);
  try {
    let gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
    try {
      await gateway.kernel.fleetStarted;
      const added = await api(
        gateway,
        "POST",
        "/v1/mcp/proxy/servers",
        gateway.token,
        faultJson("two"),
      );
      assert.equal(added.status, 201, added.text);
      assert.equal(added.body.server.state, "READY");
      assert.deepEqual(added.body.fleet.added, ["two"]);
      const text = await Deno.readTextFile(fleet.path);
      assert.ok(text.startsWith(original), `the old text is kept:\n${text}`);
      assert.equal(await Deno.readTextFile(`${fleet.path}.bak`), original);
      const listed = await api(gateway, "GET", "/v1/mcp/proxy/servers");
      assert.deepEqual(listed.body.servers.map((s: { id: string }) => s.id), ["one", "two"]);
      assert.ok(listed.body.servers.every((s: { tools: number }) => s.tools > 0));
    } finally {
      await gateway.stop();
    }
    gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
    try {
      await gateway.kernel.fleetStarted;
      assert.equal(gateway.kernel.proxy.get("two")?.state, "READY", "the add was persisted");
    } finally {
      await gateway.stop();
    }
  } finally {
    await fleet.remove();
  }
});

Deno.test("An invalid server is refused with 400 listing the problems and the file is left byte-for-byte unchanged", async () => {
  const original = "# nothing runs here yet\nproxy_servers: []\n";
  await withGateway(original, async (gateway, path) => {
    const before = await Deno.readFile(path!);
    const bad = await api(gateway, "POST", "/v1/mcp/proxy/servers", gateway.token, {
      id: "Bad Id",
      transport: "carrier-pigeon",
      timeouts: { cal: 3 },
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, "invalid_fleet");
    assert.match(bad.body.error.message, /must be lowercase letters/);
    assert.match(bad.body.error.message, /must be one of stdio, sse, http/);
    assert.match(bad.body.error.message, /did you mean "call"/);
    const notJson = await api(gateway, "POST", "/v1/mcp/proxy/servers", gateway.token, "{nope");
    assert.equal(notJson.status, 400);
    const list = await api(gateway, "POST", "/v1/mcp/proxy/servers", gateway.token, [1]);
    assert.equal(list.status, 400);
    assert.deepEqual(await Deno.readFile(path!), before);
  });
});

Deno.test("Two concurrent adds both land in the file and both start", async () => {
  await withGateway("proxy_servers:\n", async (gateway, path) => {
    const [a, b] = await Promise.all([
      api(gateway, "POST", "/v1/mcp/proxy/servers", gateway.token, faultJson("left")),
      api(gateway, "POST", "/v1/mcp/proxy/servers", gateway.token, faultJson("right")),
    ]);
    assert.equal(a.status, 201, a.text);
    assert.equal(b.status, 201, b.text);
    const text = await Deno.readTextFile(path!);
    assert.match(text, /id: left/);
    assert.match(text, /id: right/);
    assert.equal(gateway.kernel.proxy.get("left")?.state, "READY");
    assert.equal(gateway.kernel.proxy.get("right")?.state, "READY");
    const dup = await api(
      gateway,
      "POST",
      "/v1/mcp/proxy/servers",
      gateway.token,
      faultJson("left"),
    );
    assert.equal(dup.status, 409);
    assert.match(dup.body.error.message, /"left" is already in the fleet file/);
  });
});

Deno.test("Disable, enable, restart and delete apply at once; an unknown id is a 404 naming it", async () => {
  await withGateway(`proxy_servers:${faultServer("one")}`, async (gateway, path) => {
    const operator = await jwt("operator all_tenants");
    const off = await api(gateway, "POST", "/v1/mcp/proxy/servers/one/disable");
    assert.equal(off.status, 200, off.text);
    assert.deepEqual(off.body.fleet.removed, ["one"]);
    assert.equal(gateway.kernel.proxy.get("one"), undefined);
    const seen = await api(gateway, "GET", "/v1/mcp/proxy/servers/one", operator);
    assert.equal(seen.body.enabled, false);
    assert.equal(seen.body.state, "STOPPED");
    assert.match(await Deno.readTextFile(path!), /enabled: false/);
    const idle = await api(gateway, "POST", "/v1/mcp/proxy/servers/one/restart", operator);
    assert.equal(idle.status, 409, "a disabled server cannot be restarted");

    const on = await api(gateway, "POST", "/v1/mcp/proxy/servers/one/enable");
    assert.equal(on.status, 200, on.text);
    assert.equal(on.body.server.state, "READY");

    const restarted = await api(gateway, "POST", "/v1/mcp/proxy/servers/one/restart", operator);
    assert.equal(restarted.status, 200, restarted.text);
    assert.equal(restarted.body.server.state, "READY");

    const gone = await api(gateway, "DELETE", "/v1/mcp/proxy/servers/one");
    assert.equal(gone.status, 200, gone.text);
    assert.equal(gateway.kernel.proxy.get("one"), undefined);
    assert.doesNotMatch(await Deno.readTextFile(path!), /id: one/);

    for (
      const [method, route] of [
        ["GET", "/v1/mcp/proxy/servers/nope"],
        ["DELETE", "/v1/mcp/proxy/servers/nope"],
        ["POST", "/v1/mcp/proxy/servers/nope/enable"],
        ["POST", "/v1/mcp/proxy/servers/nope/restart"],
        ["GET", "/v1/connectors/nope"],
      ] as const
    ) {
      const unknown = await api(gateway, method, route);
      assert.equal(unknown.status, 404, `${method} ${route}`);
      assert.match(unknown.body.error.message, /"nope"/);
    }
  });
});

Deno.test("A reload with a broken fleet file says why with file:line and the running fleet stays", async () => {
  await withGateway(`proxy_servers:${faultServer("one")}`, async (gateway, path) => {
    const good = await Deno.readTextFile(path!);
    await Deno.writeTextFile(
      path!,
      good.replace("sandbox: deno", "sandbox: deno\n    trasport: stdio"),
    );
    const refused = await api(gateway, "POST", "/v1/mcp/reload");
    assert.equal(refused.status, 422, refused.text);
    assert.equal(refused.body.error.code, "reload_refused");
    assert.equal(refused.body.fleet.status, "refused");
    assert.match(
      refused.body.error.message,
      /fleet\.yaml:\d+: .*trasport.*did you mean "transport"/,
    );
    assert.equal(refused.body.policies.status, "reloaded");
    assert.equal(gateway.kernel.proxy.get("one")?.state, "READY", "the old fleet stays");

    await Deno.writeTextFile(path!, good);
    const ok = await api(gateway, "POST", "/v1/mcp/reload");
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.fleet.status, "reloaded");
  });
});

Deno.test("While the MCP interface is off, /mcp, /sse and /messages answer 503 saying how to turn it on", async () => {
  await withGateway(undefined, async (gateway) => {
    const off = await api(gateway, "POST", "/v1/mcp/disable");
    assert.equal(off.body.enabled, false);
    for (const [method, path] of [["POST", "/mcp"], ["GET", "/sse"], ["POST", "/messages"]]) {
      const answer = await api(
        gateway,
        method!,
        path!,
        gateway.token,
        method === "POST" ? {} : undefined,
      );
      assert.equal(answer.status, 503, `${method} ${path}`);
      assert.equal(answer.body.error.code, "mcp_disabled");
      assert.match(answer.body.error.message, /POST \/v1\/mcp\/enable/);
    }
    assert.equal((await api(gateway, "GET", "/v1/mcp/status")).body.enabled, false);
    const on = await api(gateway, "POST", "/v1/mcp/enable");
    assert.equal(on.body.enabled, true);
    const client = await connectHttp(gateway);
    try {
      assert.ok((await client.listTools()).tools.length > 0);
    } finally {
      await client.close();
    }
  });
});

Deno.test("The effective configuration shows no secret: tokens, JWT and approval secrets, headers and env values", async () => {
  const secrets = {
    token: "static-token-that-must-not-leak",
    admin: "admin-token-that-must-not-leak",
    header: "header-value-that-must-not-leak",
    env: "env-value-that-must-not-leak",
  };
  const fleet = `proxy_servers:
  - id: web
    url: https://mcp.example.com/mcp
    headers: { Authorization: Bearer ${secrets.header} }
    enabled: false
  - id: local
    command: ["deno", "run", "x.ts"]
    env: { API_TOKEN: ${secrets.env} }
    enabled: false
`;
  const approval = "approval-secret-that-must-not-leak-0123456789";
  await withGateway(fleet, async (gateway) => {
    const answer = await api(gateway, "GET", "/v1/mcp/config");
    assert.equal(answer.status, 200);
    for (const secret of [...Object.values(secrets), JWT_SECRET, approval]) {
      assert.ok(!answer.text.includes(secret), `${secret} leaked`);
    }
    assert.equal(answer.body.config.server.authToken, "[redacted]");
    assert.equal(answer.body.config.server.adminToken, "[redacted]");
    assert.equal(answer.body.fleet.servers[0].headers.Authorization, "[redacted]");
    assert.equal(answer.body.fleet.servers[1].env.API_TOKEN, "[redacted]");
  }, {
    MCP_SERVER_AUTH_TOKEN: secrets.token,
    MCP_ADMIN_TOKEN: secrets.admin,
    MCP_APPROVAL_SECRET: approval,
  });
});

Deno.test("Status, connectors and sync answer operators: auth modes, each destination's policy with file:line, sync needs admin", async () => {
  const policyDir = await Deno.makeTempDir({ prefix: "agent33-admin-policy-" });
  await Deno.writeTextFile(
    `${policyDir}/policy.yaml`,
    `tenants:\n  "*": {}\nconnectors:\n  one: { tenants: [acme], effects: [read] }\n`,
  );
  const fleet = `proxy_servers:
  - id: one
    url: https://one.example.com/mcp
    enabled: false
  - id: two
    url: https://two.example.com/mcp
    enabled: false
`;
  try {
    await withGateway(fleet, async (gateway) => {
      const operator = await jwt("operator all_tenants");
      const status = await api(gateway, "GET", "/v1/mcp/status", operator);
      assert.equal(status.body.enabled, true);
      assert.equal(status.body.transport, "http");
      assert.deepEqual(status.body.auth.modes, ["static_token", "admin_token", "jwt_hs256"]);
      assert.ok(status.body.protocolVersions.includes("2025-06-18"));
      assert.equal(typeof status.body.sessions, "number");

      const connectors = await api(gateway, "GET", "/v1/connectors", operator);
      const [one, two] = connectors.body.connectors;
      assert.equal(one.server, "one");
      assert.match(one.policy.source, /policy\.yaml:4$/);
      assert.deepEqual(one.policy.tenants, ["acme"]);
      assert.equal(one.breaker, "CLOSED");
      assert.equal(two.summary, "no connector policy: every tenant, every effect class");
      const single = await api(gateway, "GET", "/v1/connectors/one", operator);
      assert.equal(single.body.summary, `tenants acme; effect classes read (${one.policy.source})`);

      // Running a registry sync changes proposals: it needs admin, not operator.
      const sync = await api(gateway, "POST", "/v1/mcp/sync/run", operator);
      assert.equal(sync.status, 403);
    }, { MCP_POLICY_PATH: policyDir });
  } finally {
    await Deno.remove(policyDir, { recursive: true });
  }
});

Deno.test("A hand edit after an API change is still applied by the file watcher", async () => {
  await withGateway("proxy_servers:\n", async (gateway, path) => {
    const added = await api(gateway, "POST", "/v1/mcp/proxy/servers", gateway.token, {
      id: "web",
      url: "https://web.example.com/mcp",
      enabled: false,
    });
    assert.equal(added.status, 201, added.text);
    await Deno.writeTextFile(
      path!,
      (await Deno.readTextFile(path!)).replace("web.example", "w2.example"),
    );
    await eventually(
      () => gateway.kernel.fleet.some((s) => s.url === "https://w2.example.com/mcp"),
      "the watcher to apply the hand edit",
      5_000,
    );
  });
});
