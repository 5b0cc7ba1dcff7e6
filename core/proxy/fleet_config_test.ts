import assert from "node:assert/strict";
import { GatewayError } from "../support/errors.ts";
import {
  type FleetDefaults,
  type FleetServer,
  loadFleetConfig,
  parseFleetConfig,
} from "./fleet_config.ts";

const DEFAULTS: FleetDefaults = { separator: "__", healthIntervalSeconds: 30 };
const SEED = new URL("../../tests/fixtures/fleet/seed.yaml", import.meta.url);

function parse(text: string, env: Record<string, string> = {}, defaults = DEFAULTS) {
  return parseFleetConfig(text, "fleet.yaml", env, defaults);
}

/** The problems a fleet file is rejected with; fails if it is accepted. */
function problemsOf(
  text: string,
  env: Record<string, string> = {},
  defaults = DEFAULTS,
): string[] {
  try {
    parse(text, env, defaults);
  } catch (error) {
    assert.ok(error instanceof GatewayError, String(error));
    assert.equal(error.code, "config_invalid");
    const { problems } = error.data;
    assert.ok(Array.isArray(problems));
    return problems;
  }
  assert.fail("expected the fleet file to be rejected");
}

/** What every server gets when it sets nothing but its id and endpoint. */
function defaultsFor(id: string, line: number): Omit<FleetServer, "transport"> {
  return {
    id,
    headers: {},
    env: {},
    enabled: true,
    timeouts: { connectMs: 30_000, callMs: 60_000 },
    health: { intervalMs: 30_000, degradedAfter: 1, failedAfter: 3 },
    breaker: { threshold: 5, baseMs: 30_000, maxMs: 600_000 },
    permissions: {},
    sandbox: "none",
    isolation: "worker",
    prefix: id,
    tools: { allow: [], deny: [] },
    line,
  };
}

Deno.test("loadFleetConfig parses the seed example with its variables set", async () => {
  const fleet = await loadFleetConfig(SEED.pathname, { GITHUB_TOKEN: "ghp_x" }, DEFAULTS);
  assert.deepEqual(fleet, {
    path: SEED.pathname,
    servers: [
      {
        ...defaultsFor("github", 2),
        transport: "stdio",
        command: ["npx", "-y", "@modelcontextprotocol/server-github"],
        env: { GITHUB_TOKEN: "ghp_x" },
      },
      {
        ...defaultsFor("gateway", 8),
        transport: "sse",
        url: "https://mcp.example.com/sse",
        // Disabled and MCP_GATEWAY_TOKEN unset: the raw text is kept, and that is no error.
        headers: { Authorization: "Bearer ${MCP_GATEWAY_TOKEN}" },
        enabled: false,
      },
    ],
  });
});

Deno.test("loadFleetConfig interpolates an enabled server's headers", async () => {
  const text = (await Deno.readTextFile(SEED)).replace("enabled: false", "enabled: true");
  const fleet = parse(text, { GITHUB_TOKEN: "g", MCP_GATEWAY_TOKEN: "secret" });
  assert.deepEqual(fleet.servers[1]?.headers, { Authorization: "Bearer secret" });
});

Deno.test("loadFleetConfig names a missing file and the variable that points at it", async () => {
  await assert.rejects(loadFleetConfig("/nonexistent/fleet.yaml", {}, DEFAULTS), {
    name: "GatewayError",
    code: "config_invalid",
    message: 'Fleet config "/nonexistent/fleet.yaml" does not exist; create it or point ' +
      "MCP_PROXY_CONFIG_PATH (--config) at it",
  });
});

Deno.test("parseFleetConfig applies defaults, with the health interval from the caller", () => {
  const fleet = parse("proxy_servers:\n  - id: a\n    command: [node, server.js]\n", {}, {
    separator: "__",
    healthIntervalSeconds: 45,
  });
  assert.deepEqual(fleet.servers, [{
    ...defaultsFor("a", 2),
    transport: "stdio",
    command: ["node", "server.js"],
    health: { intervalMs: 45_000, degradedAfter: 1, failedAfter: 3 },
  }]);
});

Deno.test("parseFleetConfig defaults transport to stdio with a command and http without", () => {
  const fleet = parse(
    "proxy_servers:\n  - id: local\n    command: [x]\n  - id: remote\n    url: http://127.0.0.1:9000/mcp\n",
  );
  assert.deepEqual(fleet.servers.map((s) => [s.id, s.transport]), [
    ["local", "stdio"],
    ["remote", "http"],
  ]);
});

Deno.test("parseFleetConfig reads every extension field, converting seconds to ms", () => {
  const fleet = parse(
    `proxy_servers:
  - id: fs
    command: [deno, run, server.ts]
    cwd: \${HOME}/mcp
    sandbox: deno
    permissions: { read: ["/data"], net: false, env: true }
    timeouts: { connect: 0.5, call: 120 }
    health: { interval: 10, degraded_after: 2, failed_after: 4 }
    breaker: { threshold: 3, base: 5, max: 60 }
    prefix: files
    tools: { allow: ["read_*"], deny: ["read_secret*"] }
`,
    { HOME: "/home/me" },
  );
  assert.deepEqual(fleet.servers, [{
    ...defaultsFor("fs", 2),
    transport: "stdio",
    command: ["deno", "run", "server.ts"],
    cwd: "/home/me/mcp",
    sandbox: "deno",
    permissions: { read: ["/data"], net: false, env: true },
    timeouts: { connectMs: 500, callMs: 120_000 },
    health: { intervalMs: 10_000, degradedAfter: 2, failedAfter: 4 },
    breaker: { threshold: 3, baseMs: 5_000, maxMs: 60_000 },
    prefix: "files",
    tools: { allow: ["read_*"], deny: ["read_secret*"] },
  }]);
});

Deno.test('parseFleetConfig keeps prefix "" as unprefixed', () => {
  const fleet = parse('proxy_servers:\n  - id: a\n    command: [x]\n    prefix: ""\n');
  assert.equal(fleet.servers[0]?.prefix, "");
});

Deno.test("parseFleetConfig treats an empty file, a comment-only file and an empty list as no servers", () => {
  for (const text of ["", "# nothing yet\n", "proxy_servers: []\n", "proxy_servers:\n"]) {
    assert.deepEqual(parse(text), { servers: [], path: "fleet.yaml" }, JSON.stringify(text));
  }
});

Deno.test("parseFleetConfig uses the default of ${VAR:-default} when VAR is unset", () => {
  const fleet = parse(
    "proxy_servers:\n  - id: r\n    url: http://${HOST:-127.0.0.1}:${PORT:-9000}/mcp\n",
    { PORT: "9100" },
  );
  assert.equal(fleet.servers[0]?.url, "http://127.0.0.1:9100/mcp");
});

Deno.test("parseFleetConfig interpolates command, env, headers, url and cwd, with $$ as $", () => {
  const env = { BIN: "/usr/bin/node", TOKEN: "t0k", HOST: "h", DIR: "/srv" };
  const fleet = parse(
    `proxy_servers:
  - id: a
    command: ["\${BIN}", "--price=$$5"]
    env: { TOKEN: "\${TOKEN}" }
    cwd: \${DIR}
  - id: b
    url: https://\${HOST}/mcp
    headers: { X-Token: "\${TOKEN}" }
`,
    env,
  );
  const [a, b] = fleet.servers;
  assert.deepEqual(a?.command, ["/usr/bin/node", "--price=$5"]);
  assert.deepEqual(a?.env, { TOKEN: "t0k" });
  assert.equal(a?.cwd, "/srv");
  assert.equal(b?.url, "https://h/mcp");
  assert.deepEqual(b?.headers, { "X-Token": "t0k" });
});

Deno.test("parseFleetConfig reports every problem in one config_invalid error", () => {
  const text = "proxy_servers:\n  - id: Bad\n    command: [x]\n  - id: b\n    transport: tcp\n";
  assert.throws(() => parse(text), (error: unknown) => {
    assert.ok(error instanceof GatewayError);
    assert.equal(error.code, "config_invalid");
    const problems = [
      'fleet.yaml:2: proxy_servers[0].id must be lowercase letters, digits, _ and -, starting with a letter or digit, received "Bad"',
      'fleet.yaml:5: proxy_servers[1].transport must be one of stdio, sse, http, received "tcp"',
    ];
    assert.deepEqual(error.data, { path: "fleet.yaml", problems });
    assert.equal(
      error.message,
      `Invalid fleet config "fleet.yaml":\n  - ${problems.join("\n  - ")}`,
    );
    return true;
  });
});

Deno.test("parseFleetConfig rejects a bad transport naming its line", () => {
  assert.deepEqual(
    problemsOf(
      "proxy_servers:\n  - id: a\n    command: [x]\n  - id: b\n    url: http://h/\n    transport: tcp\n",
    ),
    ['fleet.yaml:6: proxy_servers[1].transport must be one of stdio, sse, http, received "tcp"'],
  );
});

Deno.test("parseFleetConfig rejects an id outside ^[a-z0-9][a-z0-9_-]*$", () => {
  for (const id of ["GitHub", "-a", "a.b", '""']) {
    const [problem, ...rest] = problemsOf(`proxy_servers:\n  - id: ${id}\n    command: [x]\n`);
    assert.match(
      problem ?? "",
      /^fleet\.yaml:2: proxy_servers\[0\]\.id must be lowercase letters/,
      id,
    );
    assert.deepEqual(rest, [], id);
  }
  assert.deepEqual(problemsOf("proxy_servers:\n  - id: 7\n    command: [x]\n"), [
    'fleet.yaml:2: proxy_servers[0].id must be a string, received 7; quote it: "7"',
  ]);
});

Deno.test("parseFleetConfig rejects an id or prefix whose tool names would read as another server's", () => {
  assert.deepEqual(problemsOf("proxy_servers:\n  - id: gh_\n    command: [x]\n"), [
    'fleet.yaml:2: proxy_servers[0].id "gh_" must not end with "_": followed by the tool ' +
    'separator "__" its tool names would read as another server\'s; rename it, e.g. "gh"',
  ]);
  const [problem] = problemsOf("proxy_servers:\n  - id: gh\n    prefix: git_\n    command: [x]\n");
  assert.match(problem ?? "", /proxy_servers\[0\]\.prefix "git_" must not end with "_"/);
});

Deno.test("parseFleetConfig rejects an id containing the tool separator", () => {
  assert.deepEqual(problemsOf("proxy_servers:\n  - id: my__server\n    command: [x]\n"), [
    'fleet.yaml:2: proxy_servers[0].id "my__server" must not contain the tool separator "__" ' +
    "(MCP_PROXY_TOOL_SEPARATOR); rename the server",
  ]);
  const dash = { separator: "-", healthIntervalSeconds: 30 };
  assert.equal(
    parse("proxy_servers:\n  - id: a_b\n    command: [x]\n", {}, dash).servers.length,
    1,
  );
  assert.equal(problemsOf("proxy_servers:\n  - id: a-b\n    command: [x]\n", {}, dash).length, 1);
});

Deno.test("parseFleetConfig rejects a stdio server without a command", () => {
  assert.deepEqual(problemsOf("proxy_servers:\n  - id: a\n    transport: stdio\n"), [
    "fleet.yaml:2: proxy_servers[0].command is required for a stdio server, " +
    'e.g. command: ["npx", "-y", "@modelcontextprotocol/server-github"]',
  ]);
});

Deno.test("parseFleetConfig rejects a server with neither command nor url", () => {
  assert.deepEqual(problemsOf("proxy_servers:\n  - id: a\n"), [
    "fleet.yaml:2: proxy_servers[0] needs a command (for a stdio server) or a url (for an sse or http server)",
  ]);
});

Deno.test("parseFleetConfig rejects an http or sse server without a url", () => {
  assert.deepEqual(problemsOf("proxy_servers:\n  - id: a\n    transport: http\n"), [
    "fleet.yaml:2: proxy_servers[0].url is required for an http server, e.g. url: https://mcp.example.com/mcp",
  ]);
  assert.deepEqual(problemsOf("proxy_servers:\n  - id: a\n    transport: sse\n"), [
    "fleet.yaml:2: proxy_servers[0].url is required for an sse server, e.g. url: https://mcp.example.com/mcp",
  ]);
});

Deno.test("parseFleetConfig rejects a command on an http server and a url on a stdio server", () => {
  assert.deepEqual(
    problemsOf(
      "proxy_servers:\n  - id: a\n    transport: http\n    url: http://h/\n    command: [x]\n" +
        "  - id: b\n    command: [x]\n    url: http://h/\n",
    ),
    [
      "fleet.yaml:5: proxy_servers[0].command is only for stdio servers; remove it or set transport: stdio (this one is http)",
      "fleet.yaml:8: proxy_servers[1].url is only for sse and http servers; remove it or set transport: sse or http",
    ],
  );
});

Deno.test("parseFleetConfig rejects a url that is not http(s) without echoing interpolated secrets", () => {
  assert.deepEqual(
    problemsOf("proxy_servers:\n  - id: a\n    url: ftp://${HOST}/mcp\n", { HOST: "user:pw@h" }),
    [
      'fleet.yaml:3: proxy_servers[0].url must be an http:// or https:// URL, received "ftp://${HOST}/mcp"',
    ],
  );
});

Deno.test("parseFleetConfig rejects an unknown key, suggesting the close known one", () => {
  assert.deepEqual(
    problemsOf("proxy_servers:\n  - id: a\n    command: [x]\n    trasport: stdio\n"),
    ['fleet.yaml:4: proxy_servers[0].trasport is not a known field; did you mean "transport"?'],
  );
  assert.deepEqual(
    problemsOf(
      "proxy_servers:\n  - id: a\n    command: [x]\n    timeouts:\n      connect_ms: 5000\n",
    ),
    [
      'fleet.yaml:5: proxy_servers[0].timeouts.connect_ms is not a known field; did you mean "connect" (in seconds)?',
    ],
  );
  assert.deepEqual(problemsOf("proxy_server:\n  - id: a\n    command: [x]\n"), [
    'fleet.yaml:1: proxy_server is not a known field; did you mean "proxy_servers"?',
    "fleet.yaml:1: proxy_servers is required: list the upstream servers under it (an empty file means no servers)",
  ]);
});

Deno.test("parseFleetConfig rejects an unknown key with nothing close, listing the known ones", () => {
  assert.deepEqual(
    problemsOf("proxy_servers:\n  - id: a\n    command: [x]\n    tools: { only: [x] }\n"),
    ["fleet.yaml:4: proxy_servers[0].tools.only is not a known field; known fields are allow, deny"],
  );
});

Deno.test("parseFleetConfig rejects a duplicate id naming both lines", () => {
  assert.deepEqual(
    problemsOf(
      "proxy_servers:\n  - id: a\n    command: [x]\n  - id: b\n    command: [x]\n" +
        "  - id: a\n    url: http://h/\n",
    ),
    [
      'fleet.yaml:6: proxy_servers[2].id "a" is already used by proxy_servers[0] (line 2); ' +
      "give each server a unique id",
    ],
  );
});

Deno.test("parseFleetConfig rejects two servers with the same tool prefix", () => {
  assert.deepEqual(
    problemsOf(
      "proxy_servers:\n  - id: github\n    command: [x]\n  - id: gh2\n    command: [x]\n" +
        "    prefix: github\n",
    ),
    [
      'fleet.yaml:6: proxy_servers[1].prefix "github" is already the tool prefix of server ' +
      '"github" (line 2); tool names would collide, so set a different prefix',
    ],
  );
  // Any number of servers may be unprefixed.
  const fleet = parse(
    'proxy_servers:\n  - id: a\n    command: [x]\n    prefix: ""\n  - id: b\n    command: [x]\n    prefix: ""\n',
  );
  assert.equal(fleet.servers.length, 2);
});

Deno.test("parseFleetConfig rejects a missing variable naming server, field and variable", () => {
  assert.deepEqual(
    problemsOf(
      "proxy_servers:\n  - id: github\n    command: [npx]\n    env:\n      GITHUB_TOKEN: ${GITHUB_TOKEN}\n",
    ),
    [
      'fleet.yaml:5: server "github" env.GITHUB_TOKEN needs variable GITHUB_TOKEN, which is not set; ' +
      "export it or use ${GITHUB_TOKEN:-default}",
    ],
  );
  assert.deepEqual(
    problemsOf('proxy_servers:\n  - id: s\n    command: ["${BIN}", "--user=${USER}"]\n'),
    [
      'fleet.yaml:3: server "s" command[0] needs variable BIN, which is not set; export it or use ${BIN:-default}',
      'fleet.yaml:3: server "s" command[1] needs variable USER, which is not set; export it or use ${USER:-default}',
    ],
  );
});

Deno.test("parseFleetConfig lets a disabled server leave variables unset, keeping the raw text", () => {
  const fleet = parse(
    "proxy_servers:\n  - id: a\n    command: [x]\n    enabled: false\n    env:\n      T: ${T}\n      U: ${U:-u}\n",
  );
  assert.deepEqual(fleet.servers[0]?.env, { T: "${T}", U: "u" });
  assert.equal(fleet.servers[0]?.enabled, false);
  // The raw url is not judged as a URL until its variables are there.
  const remote = parse(
    "proxy_servers:\n  - id: r\n    url: https://${HOST}/mcp\n    enabled: false\n",
  );
  assert.equal(remote.servers[0]?.url, "https://${HOST}/mcp");
});

Deno.test("parseFleetConfig rejects a malformed variable reference even on a disabled server", () => {
  assert.deepEqual(
    problemsOf("proxy_servers:\n  - id: a\n    enabled: false\n    command: [x]\n    cwd: ${DIR\n"),
    [
      'fleet.yaml:5: server "a" cwd: Unclosed variable reference "${DIR"; close it with }, or write ' +
      "${NAME} or ${NAME:-default} (NAME is letters, digits and _), or $$ for a literal $",
    ],
  );
});

Deno.test("parseFleetConfig reports YAML syntax errors with file:line:col", () => {
  assert.deepEqual(problemsOf("proxy_servers:\n  - id: a\n    id: b\n"), [
    "fleet.yaml:3:5: invalid YAML: Map keys must be unique",
  ]);
  assert.deepEqual(problemsOf("proxy_servers: x: y\n"), [
    "fleet.yaml:1:16: invalid YAML: Nested mappings are not allowed in compact mappings",
  ]);
});

Deno.test("parseFleetConfig asks to quote a number where a string is expected", () => {
  assert.deepEqual(
    problemsOf("proxy_servers:\n  - id: a\n    command: [node, s.js, --port, 3000]\n"),
    ['fleet.yaml:3: proxy_servers[0].command[3] must be a string, received 3000; quote it: "3000"'],
  );
});

Deno.test("parseFleetConfig rejects a root that is not a mapping and a proxy_servers that is not a list", () => {
  assert.deepEqual(problemsOf("- id: a\n"), [
    "fleet.yaml:1: the file must be a mapping with a proxy_servers list, received a list",
  ]);
  assert.deepEqual(problemsOf("proxy_servers:\n  id: a\n"), [
    "fleet.yaml:1: proxy_servers must be a list of servers, received a mapping",
  ]);
  assert.deepEqual(problemsOf("proxy_servers:\n  - github\n"), [
    'fleet.yaml:2: proxy_servers[0] must be a mapping with at least an id, received "github"',
  ]);
});

Deno.test("parseFleetConfig rejects bad field types and ranges with the value received", () => {
  assert.deepEqual(
    problemsOf(`proxy_servers:
  - id: a
    command: []
    enabled: "no"
    timeouts: { call: 0 }
    health: { failed_after: 1.5 }
    breaker: { threshold: 0 }
    sandbox: docker
    tools: { deny: "x*" }
`),
    [
      "fleet.yaml:3: proxy_servers[0].command must not be empty",
      'fleet.yaml:4: proxy_servers[0].enabled must be true or false, received "no"',
      "fleet.yaml:5: proxy_servers[0].timeouts.call must be greater than 0, received 0",
      "fleet.yaml:6: proxy_servers[0].health.failed_after must be a whole number, received 1.5",
      "fleet.yaml:7: proxy_servers[0].breaker.threshold must be at least 1, received 0",
      'fleet.yaml:8: proxy_servers[0].sandbox must be one of none, deno, received "docker"',
      'fleet.yaml:9: proxy_servers[0].tools.deny must be a list, received "x*"',
    ],
  );
});

Deno.test("parseFleetConfig rejects breaker and health settings that contradict each other", () => {
  assert.deepEqual(
    problemsOf(
      "proxy_servers:\n  - id: a\n    command: [x]\n    breaker: { base: 900 }\n" +
        "    health: { degraded_after: 4 }\n",
    ),
    [
      "fleet.yaml:4: proxy_servers[0].breaker.base (900 s) must not exceed max (600 s, the default); set max too",
      "fleet.yaml:5: proxy_servers[0].health.degraded_after (4) must not exceed failed_after (3, the default); set failed_after too",
    ],
  );
});

Deno.test("parseFleetConfig rejects permissions without sandbox: deno", () => {
  assert.deepEqual(
    problemsOf("proxy_servers:\n  - id: a\n    command: [x]\n    permissions: { read: true }\n"),
    [
      "fleet.yaml:4: proxy_servers[0].permissions only apply with sandbox: deno; add sandbox: deno or remove permissions",
    ],
  );
});

Deno.test("parseFleetConfig rejects stdio-only fields on remote servers", () => {
  assert.deepEqual(
    problemsOf(
      "proxy_servers:\n  - id: a\n    url: http://h/\n    env: { A: b }\n    sandbox: deno\n",
    ),
    [
      "fleet.yaml:4: proxy_servers[0].env is only for stdio servers (it configures the child process); remove it",
      "fleet.yaml:5: proxy_servers[0].sandbox deno only applies to stdio servers; remove it",
    ],
  );
});

Deno.test("parseFleetConfig rejects header names that are not HTTP tokens", () => {
  assert.deepEqual(
    problemsOf('proxy_servers:\n  - id: a\n    url: http://h/\n    headers: { "Bad Name": x }\n'),
    [
      'fleet.yaml:4: proxy_servers[0].headers["Bad Name"] is not a valid header name: use letters, digits and -, e.g. Authorization',
    ],
  );
});

Deno.test("A control character in a command, url, cwd or header value is refused with its line", () => {
  const cases = [
    `  - id: a\n    command: ["node", "x\\ny"]\n`,
    `  - id: a\n    url: "http://h/\\r\\nX-Evil: 1"\n    transport: http\n`,
    `  - id: a\n    command: ["node"]\n    cwd: "/tmp\\u0000x"\n`,
    `  - id: a\n    url: http://h/mcp\n    transport: http\n    headers: { X-A: "v\\r\\nX-Evil: 1" }\n`,
  ];
  for (const yaml of cases) {
    assert.throws(
      () => parse(`proxy_servers:\n${yaml}`),
      (e: Error) => /fleet\.yaml:\d+/.test(e.message) && /control character/.test(e.message),
      yaml,
    );
  }
});

Deno.test("isolation: inline is accepted for a stdio server and refused for a remote one", () => {
  const { servers: [inline] } = parse(
    `proxy_servers:\n  - id: a\n    command: ["node", "s.js"]\n    isolation: inline\n`,
  );
  assert.equal(inline!.isolation, "inline");
  const { servers: [byDefault] } = parse(
    `proxy_servers:\n  - id: a\n    command: ["node", "s.js"]\n`,
  );
  assert.equal(byDefault!.isolation, "worker");
  const problems = problemsOf(
    `proxy_servers:\n  - id: r\n    url: http://h/mcp\n    transport: http\n    isolation: inline\n`,
  );
  assert.ok(
    problems.some((p) => /isolation/.test(p) && /only applies to stdio/.test(p)),
    problems.join("\n"),
  );
});

Deno.test("parseFleetConfig reads breaker.count as the failure classes the breaker counts", () => {
  const [server] = parse(
    "proxy_servers:\n  - id: a\n    command: [x]\n" +
      "    breaker: { count: [internal_error, timeout, tool_error, timeout] }\n",
  ).servers;
  assert.deepEqual(server!.breaker.count, ["internal_error", "timeout", "tool_error"]);
  const [plain] = parse("proxy_servers:\n  - id: a\n    command: [x]\n").servers;
  assert.equal(plain!.breaker.count, undefined, "absent: the default classes");
});

Deno.test("parseFleetConfig rejects an unknown breaker.count class, listing the known ones", () => {
  assert.deepEqual(
    problemsOf("proxy_servers:\n  - id: a\n    command: [x]\n    breaker: { count: [timeouts] }\n"),
    [
      "fleet.yaml:4: proxy_servers[0].breaker.count[0] must be one of timeout, crash, internal_error, " +
      'server_error, tool_error, received "timeouts"',
    ],
  );
});

Deno.test("scope defaults to shared and is absent from the entry; tenant and session get max_instances", () => {
  const { servers: [shared, tenant, session] } = parse(`proxy_servers:
  - id: a
    command: ["node", "a.js"]
  - id: b
    command: ["node", "b.js"]
    scope: tenant
  - id: c
    url: http://h/mcp
    scope: session
    max_instances: 4
    idle_timeout: 30
`);
  assert.equal(shared!.scope, undefined);
  assert.equal(shared!.maxInstances, undefined);
  assert.equal(shared!.idleTimeoutMs, undefined);
  assert.equal(tenant!.scope, "tenant");
  assert.equal(tenant!.maxInstances, 16);
  assert.equal(tenant!.idleTimeoutMs, 600_000);
  assert.deepEqual(tenant!.tenants, {});
  assert.equal(session!.scope, "session");
  assert.equal(session!.maxInstances, 4);
  assert.equal(session!.idleTimeoutMs, 30_000);
});

Deno.test("parseFleetConfig rejects a bad scope value naming the field, its line and the choices", () => {
  assert.deepEqual(
    problemsOf('proxy_servers:\n  - id: a\n    command: ["node"]\n    scope: per-user\n'),
    [
      'fleet.yaml:4: proxy_servers[0].scope must be one of shared, tenant, session, received "per-user"',
    ],
  );
  assert.deepEqual(
    problemsOf(
      'proxy_servers:\n  - id: a\n    command: ["node"]\n    scope: tenant\n    max_instances: 0\n',
    ),
    ["fleet.yaml:5: proxy_servers[0].max_instances must be at least 1, received 0"],
  );
});

Deno.test("parseFleetConfig rejects max_instances, idle_timeout and tenants where the scope does not use them", () => {
  assert.deepEqual(
    problemsOf(`proxy_servers:
  - id: a
    command: ["node"]
    max_instances: 3
    tenants: { acme: { env: { T: x } } }
    idle_timeout: 60
`),
    [
      "fleet.yaml:4: proxy_servers[0].max_instances only applies with scope: tenant or scope: session (a shared server runs one instance); set scope or remove max_instances",
      "fleet.yaml:5: proxy_servers[0].tenants per-tenant credentials need scope: tenant (one instance per tenant, each with its own); this server has scope: shared",
      "fleet.yaml:6: proxy_servers[0].idle_timeout only applies with scope: tenant or scope: session (a shared server's one instance never idles out); set scope or remove idle_timeout",
    ],
  );
});

Deno.test("Per-tenant credentials are interpolated, and env or headers must suit the transport", () => {
  const { servers: [stdio, http] } = parse(
    `proxy_servers:
  - id: a
    command: ["node"]
    scope: tenant
    env: { BASE: b, TOKEN: base }
    tenants:
      acme: { env: { TOKEN: "\${ACME_TOKEN}" } }
  - id: h
    url: http://h/mcp
    scope: tenant
    tenants:
      acme: { headers: { Authorization: "Bearer \${ACME_TOKEN}" } }
`,
    { ACME_TOKEN: "t0ken" },
  );
  assert.deepEqual(stdio!.tenants, { acme: { env: { TOKEN: "t0ken" }, headers: {} } });
  assert.deepEqual(http!.tenants, {
    acme: { env: {}, headers: { Authorization: "Bearer t0ken" } },
  });
  assert.deepEqual(
    problemsOf(`proxy_servers:
  - id: a
    command: ["node"]
    scope: tenant
    tenants:
      acme: { headers: { X: y } }
      globex: { env: { T: "\${UNSET_TOKEN}" } }
`),
    [
      "fleet.yaml:6: proxy_servers[0].tenants.acme.headers is only for sse and http servers; give a stdio server's tenants env instead",
      'fleet.yaml:7: server "a" tenants.globex.env.T needs variable UNSET_TOKEN, which is not set; export it or use ${UNSET_TOKEN:-default}',
    ],
  );
  assert.deepEqual(
    problemsOf(
      'proxy_servers:\n  - id: a\n    command: ["node"]\n    scope: tenant\n    tenants:\n      acme: { envv: {} }\n',
    ),
    ['fleet.yaml:6: proxy_servers[0].tenants.acme.envv is not a known field; did you mean "env"?'],
  );
});

Deno.test("auth: passthrough needs an http or sse server with scope: session and no Authorization header", () => {
  const { servers: [ok] } = parse(
    "proxy_servers:\n  - id: h\n    url: http://h/mcp\n    scope: session\n    auth: passthrough\n",
  );
  assert.equal(ok!.auth, "passthrough");
  assert.deepEqual(
    problemsOf(`proxy_servers:
  - id: a
    command: ["node"]
    scope: session
    auth: passthrough
  - id: h
    url: http://h/mcp
    auth: passthrough
    headers: { authorization: Bearer x }
`),
    [
      "fleet.yaml:5: proxy_servers[0].auth passthrough only applies to http and sse servers (it forwards the caller's bearer token as the Authorization header); remove it",
      "fleet.yaml:8: proxy_servers[1].auth passthrough needs scope: session (each session's connection carries its own caller's token); this server has scope: shared",
      "fleet.yaml:9: proxy_servers[1].headers.Authorization conflicts with auth: passthrough, which sends the caller's own token; remove one",
    ],
  );
});

Deno.test("passthrough_audience names the audience a forwarded token must carry, with auth: passthrough only", () => {
  const { servers: [one, list] } = parse(`proxy_servers:
  - id: h
    url: http://h/mcp
    scope: session
    auth: passthrough
    passthrough_audience: api://h
  - id: k
    url: http://k/mcp
    scope: session
    auth: passthrough
    passthrough_audience: [api://k, https://k.example]
`);
  assert.deepEqual(one!.passthroughAudience, ["api://h"]);
  assert.deepEqual(list!.passthroughAudience, ["api://k", "https://k.example"]);
  assert.deepEqual(
    problemsOf("proxy_servers:\n  - id: h\n    url: http://h/mcp\n    passthrough_audience: x\n"),
    [
      "fleet.yaml:4: proxy_servers[0].passthrough_audience only applies with auth: passthrough (it names the audience a forwarded token must carry); remove it or set auth: passthrough",
    ],
  );
});

Deno.test("${MCP_DATA_DIR} always resolves, to an absolute path, and permission lists interpolate", () => {
  const text = [
    "proxy_servers:",
    "  - id: memory",
    '    command: ["deno", "run", "npm:@modelcontextprotocol/server-memory@2026.8.31"]',
    "    sandbox: deno",
    "    env:",
    "      MEMORY_FILE_PATH: ${MCP_DATA_DIR}/memory.json",
    "    permissions:",
    '      read: ["${MCP_DATA_DIR}"]',
    '      write: ["${MCP_DATA_DIR}"]',
    "      env: [MEMORY_FILE_PATH]",
  ].join("\n");
  const [implicit] = parse(text).servers;
  assert.equal(implicit!.env.MEMORY_FILE_PATH, `${Deno.cwd()}/.agent33/memory.json`);
  const [named] = parse(text, { MCP_DATA_DIR: "state" }).servers;
  assert.equal(named!.env.MEMORY_FILE_PATH, `${Deno.cwd()}/state/memory.json`);
  assert.deepEqual(named!.permissions, {
    read: [`${Deno.cwd()}/state`],
    write: [`${Deno.cwd()}/state`],
    env: ["MEMORY_FILE_PATH"],
  });
});

Deno.test("The demo fleet parses with nothing set: every path it writes is absolute", async () => {
  const demo = new URL("../../demo/fleet.yaml", import.meta.url);
  const fleet = parseFleetConfig(await Deno.readTextFile(demo), "demo/fleet.yaml", {}, DEFAULTS);
  const memory = fleet.servers.find((s) => s.id === "memory")!;
  assert.ok(memory.env.MEMORY_FILE_PATH!.startsWith("/"), memory.env.MEMORY_FILE_PATH);
  assert.equal(memory.cwd, undefined);
});

Deno.test("A tenant's secrets_file gives variables to that tenant's values only, relative to the fleet file", () => {
  const files: Record<string, string> = {
    "/etc/agent33/acme.env": "# acme's\nACME_TOKEN=from-the-file\n",
  };
  const read = (path: string) => {
    if (!(path in files)) throw new Deno.errors.NotFound(`No such file: ${path}`);
    return files[path]!;
  };
  const { servers: [server] } = parseFleetConfig(
    `proxy_servers:
  - id: a
    command: ["node"]
    scope: tenant
    tenants:
      acme: { secrets_file: acme.env, env: { TOKEN: "\${ACME_TOKEN}" } }
      globex: { env: { TOKEN: "\${ACME_TOKEN:-none}" } }
`,
    "/etc/agent33/fleet.yaml",
    { ACME_TOKEN: "from-the-environment" },
    DEFAULTS,
    read,
  );
  assert.deepEqual(server!.tenants!.acme!.env, { TOKEN: "from-the-file" });
  assert.deepEqual(server!.tenants!.globex!.env, { TOKEN: "from-the-environment" });
  const problems = (() => {
    try {
      parseFleetConfig(
        `proxy_servers:
  - id: a
    command: ["node"]
    scope: tenant
    tenants:
      acme: { secrets_file: missing.env }
      globex: { secrets_file: bad.env }
`,
        "/etc/agent33/fleet.yaml",
        {},
        DEFAULTS,
        (path) => path.endsWith("bad.env") ? "TOKEN=ok\nnot a line with s3cret\n" : read(path),
      );
    } catch (error) {
      return (error as GatewayError).data.problems as string[];
    }
    assert.fail("expected a refusal");
  })();
  assert.equal(problems.length, 2);
  assert.match(
    problems[0]!,
    /^\/etc\/agent33\/fleet\.yaml:6: server "a" tenants\.acme\.secrets_file "missing\.env" cannot be read: No such file/,
  );
  assert.match(
    problems[1]!,
    /^\/etc\/agent33\/fleet\.yaml:7: server "a" tenants\.globex\.secrets_file "bad\.env" line 2 is not KEY=value/,
  );
  assert.ok(!problems[1]!.includes("s3cret"), "the bad line is not quoted");
});

Deno.test("An entry written by registry sync may not forward callers' tokens or hold tenants' credentials", () => {
  const problems = problemsOf(`proxy_servers:
  # synced from registry: evil@1.0.0
  - id: evil
    url: https://evil.example/mcp
    enabled: false
    scope: session
    auth: passthrough
`);
  assert.equal(problems.length, 1);
  assert.match(problems[0]!, /fleet\.yaml:7: proxy_servers\[0\]\.auth may not be set by sync/);
});

Deno.test("An entry written by sync or discovery may not set a variable the runtime reads; the operator's own may", () => {
  const entry = (marker: string) =>
    `proxy_servers:
${marker}  - id: steer
    command: ["deno", "run", "npm:steer@1.0.0"]
    sandbox: deno
    enabled: false
    env:
      OTEL_DENO: "true"
      npm_config_registry: https://evil.example
      PLAIN: ok
`;
  for (
    const marker of ["  # synced from registry: evil@1.0.0\n", "  # discovered by lan: steer\n"]
  ) {
    const problems = problemsOf(entry(marker));
    assert.equal(problems.length, 2, problems.join("\n"));
    assert.match(
      problems[0]!,
      /env\.OTEL_DENO may not be set by (sync|discovery): it is read by the runtime/,
    );
    assert.match(problems[1]!, /env\.npm_config_registry may not be set by/);
  }
  assert.equal(parse(entry(""), {}, DEFAULTS).servers[0]!.env.OTEL_DENO, "true");
});
