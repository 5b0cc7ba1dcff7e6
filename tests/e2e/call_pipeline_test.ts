/**
 * The one call pipeline with real upstreams: an agent's call is governed exactly like a client's
 * (scanner escalation included), an approval token survives a call that was refused for another
 * reason or never sent, and resources, prompts and completion obey the tenant's policy and the
 * connector boundary like tools do.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, type McpError } from "@modelcontextprotocol/sdk/types.js";
import { ESCALATION_META_KEY } from "../../core/mcp/call_pipeline.ts";
import type { GatewayEvent } from "../../core/bus/events.ts";
import { runPolicyCommand } from "../../cli/policy_cli.ts";
import { APPROVAL_TOKEN_META_KEY } from "../../core/governance/tool_governance.ts";
import { StreamTransport } from "../../core/mcp/stream_transport.ts";
import { spawnStdioGateway } from "../support/child_gateway.ts";
import {
  eventually,
  everythingServer,
  fixture,
  memoryServer,
  writeFleet,
} from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";
import { JWT_SECRET, policyJwt } from "../support/policy_gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

const POISONED = `
  - id: poisoned
    command: ["deno", "run", "--config", "${DENO_JSON}", "${fixture("poisoned_server.ts")}"]
    sandbox: deno
    env: { POISONED_VARIANT: original }
    permissions: { env: [POISONED_VARIANT], read: true }
`;

interface Setup {
  gateway: TestGateway;
  dir: string;
}

/** A gateway over `fleet` with `policy` (and agents) in a temp dir; everything removed after. */
async function withGateway(
  fleet: string,
  policy: string,
  fn: (setup: Setup) => Promise<void>,
  env: Record<string, string> = {},
  /** Agents and workflows (a workflow's YAML starts with `steps:`) by id. */
  agents: Record<string, string> = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "agent33-pipeline-" });
  await Deno.mkdir(`${dir}/agents`);
  await Deno.mkdir(`${dir}/workflows`);
  await Deno.mkdir(`${dir}/data`);
  for (const [id, yaml] of Object.entries(agents)) {
    await Deno.writeTextFile(
      `${dir}/${yaml.startsWith("steps:") ? "workflows" : "agents"}/${id}.yaml`,
      `id: ${id}\n${yaml}`,
    );
  }
  await Deno.writeTextFile(`${dir}/policy.yaml`, policy);
  const file = await writeFleet(`proxy_servers:${fleet.replaceAll("$DATA", `${dir}/data`)}`);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: file.path,
    MCP_POLICY_PATH: `${dir}/policy.yaml`,
    MCP_AGENTS_PATH: `${dir}/agents`,
    MCP_WORKFLOWS_PATH: `${dir}/workflows`,
    MCP_AUTH_JWT_SECRET: JWT_SECRET,
    ...env,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn({ gateway, dir });
  } finally {
    await gateway.stop();
    await file.remove();
    await Deno.remove(dir, { recursive: true });
  }
}

async function clientAs(gateway: TestGateway, tenant: string): Promise<Client> {
  const token = await policyJwt(tenant, `${tenant}-user`, "mcp");
  const client = new Client({ name: "pipeline-e2e", version: "1" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** The gateway's error code and message of a refused request. */
async function refusedWith(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  const error = await promise.then(
    () => assert.fail("the request was expected to be refused"),
    (e: McpError) => e,
  );
  return { code: (error.data as { code: string }).code, message: error.message };
}

/** A message with its approval request ids blanked, to compare two refusals' shape. */
const shape = (message: string) =>
  message.replace(/MCP error -?\d+: /, "").replace(/[0-9a-f-]{36}/g, "<id>");

Deno.test("An agent or workflow calling a scanner-flagged tool gets approval_required exactly like a client, naming the scanner", async () => {
  const script = await Deno.makeTempFile({ suffix: ".yaml" });
  await Deno.writeTextFile(
    script,
    "- tool_calls: [{ name: poisoned__lookup, arguments: { word: x } }]\n- text: done\n",
  );
  const agent = "name: Looker\ndescription: Looks words up\nsystem: Look it up.\n" +
    'model: scripted\ntools: ["poisoned__*"]\nmax_steps: 3\n';
  const workflow =
    "steps:\n  - id: look\n    tool: poisoned__lookup\n    arguments: { word: x }\n" +
    "name: Look up\ndescription: Looks x up\n";
  try {
    await withGateway(
      POISONED,
      'tenants:\n  "*": { approval: [destructive] }\n',
      async ({ gateway, dir }) => {
        await eventually(
          () => (gateway.kernel.scanner?.findingsFor("poisoned").length ?? 0) > 0,
          "the scan",
        );
        const client = await connectHttp(gateway);
        try {
          const direct = await refusedWith(
            client.callTool({ name: "poisoned__lookup", arguments: { word: "x" } }),
          );
          assert.equal(direct.code, "approval_required");
          assert.match(direct.message, /scanner escalation: scanner finding/);

          const run = (await client.callTool({
            name: "agent_invoke",
            arguments: { agent: "looker", prompt: "Look up x" },
          })).structuredContent as { status: string; approval?: { reason: string } };
          assert.equal(run.status, "approval_required", JSON.stringify(run));
          assert.equal(shape(run.approval!.reason), shape(direct.message));
          const flow = (await client.callTool({
            name: "workflow_run",
            arguments: { workflow: "lookup" },
          })).structuredContent as { status: string; approval?: { reason: string } };
          assert.equal(flow.status, "approval_required", JSON.stringify(flow));
          assert.equal(shape(flow.approval!.reason), shape(direct.message));

          // The listing says what governance decides on, and policy explain reads it back.
          const { tools } = await client.listTools();
          const listed = tools.find((t) => t.name === "poisoned__lookup")!;
          assert.equal(listed.annotations?.destructiveHint, true);
          assert.match(String(listed._meta?.[ESCALATION_META_KEY]), /scanner finding/);
          await Deno.writeTextFile(`${dir}/tools.json`, JSON.stringify({ tools }));
          const out: string[] = [];
          const code = await runPolicyCommand([
            "explain",
            "--path",
            `${dir}/policy.yaml`,
            "--tenant",
            "default",
            "--tool",
            "poisoned__lookup",
            "--args",
            '{"word":"x"}',
            "--descriptors",
            `${dir}/tools.json`,
          ], { out: (l) => out.push(l), err: (l) => out.push(l), env: {} });
          assert.equal(code, 0, out.join("\n"));
          assert.match(out.join("\n"), /verdict: +approval_required/);
          assert.match(out.join("\n"), /scanner escalation: scanner finding/);
          const fromGateway: string[] = [];
          const live = await runPolicyCommand([
            "explain",
            "--path",
            `${dir}/policy.yaml`,
            "--tenant",
            "default",
            "--tool",
            "poisoned__lookup",
            "--args",
            '{"word":"x"}',
            "--gateway",
            `${gateway.url}/mcp`,
            "--token",
            gateway.token,
          ], {
            out: (l) => fromGateway.push(l),
            err: (l) => fromGateway.push(l),
            env: {},
          });
          assert.equal(live, 0, fromGateway.join("\n"));
          assert.match(fromGateway.join("\n"), /verdict: +approval_required/);
          assert.match(fromGateway.join("\n"), /scanner escalation: scanner finding/);
        } finally {
          await client.close();
        }
      },
      {
        MCP_SCANNER_BLOCK: "critical",
        MCP_SCANNER_APPROVAL: "high",
        MCP_PLUGIN_MODEL_SCRIPTED_SCRIPT: script,
        MCP_APPROVAL_IN_BAND: "false",
      },
      { looker: agent, lookup: workflow },
    );
  } finally {
    await Deno.remove(script);
  }
});

const MEMORY_POLICY = (limit: string) => `
tenants:
  "*":
    effects: { "memory__delete_*": destructive }
    approval: [destructive]
    rate_limits:
      memory__delete_entities: ${limit}
`;

const entity = { entities: [{ name: "probe", entityType: "thing", observations: ["x"] }] };
const deletion = { entityNames: ["probe"] };

/** Files an approval for the deletion and returns the operator's token. */
async function approvedToken(gateway: TestGateway, client: Client): Promise<string> {
  const refused = await client.callTool({ name: "memory__delete_entities", arguments: deletion })
    .then(() => assert.fail("needs approval"), (e: McpError) => e);
  const { request } = refused.data as { code: string; request: { id: string } };
  const approved = await fetch(`${gateway.url}/v1/approvals/${request.id}/approve`, {
    method: "POST",
    // Another identity decides: the requester may not approve its own request.
    headers: { Authorization: `Bearer ${gateway.adminToken}`, "Content-Type": "application/json" },
  });
  assert.equal(approved.status, 200);
  return (await approved.json()).token;
}

Deno.test("An approval token refused by a rate limit stays valid for a later retry", async () => {
  // One call, then one more per second: the approval request itself uses the first.
  await withGateway(
    memoryServer("$DATA"),
    MEMORY_POLICY("{ per_minute: 60, burst: 1 }"),
    async ({ gateway }) => {
      const client = await connectHttp(gateway);
      try {
        await client.callTool({ name: "memory__create_entities", arguments: entity });
        const token = await approvedToken(gateway, client);
        const withToken = () =>
          client.callTool({
            name: "memory__delete_entities",
            arguments: deletion,
            _meta: { [APPROVAL_TOKEN_META_KEY]: token },
          });
        assert.equal((await refusedWith(withToken())).code, "rate_limited");
        let result: Awaited<ReturnType<typeof withToken>> | undefined;
        await eventually(async () => {
          result = await withToken().catch((e: McpError) => {
            assert.equal((e.data as { code: string }).code, "rate_limited", e.message);
            return undefined;
          });
          return result !== undefined;
        }, "the rate limit to refill");
        assert.notEqual(result!.isError, true);
        let again = "rate_limited";
        await eventually(async () => {
          again = (await refusedWith(withToken())).code;
          return again !== "rate_limited";
        }, "the rate limit to refill again");
        assert.equal(again, "approval_replayed", "the token was used once");
      } finally {
        await client.close();
      }
    },
    { MCP_APPROVAL_IN_BAND: "false" },
  );
});

Deno.test("An approval token refused by an OPEN breaker stays valid once the breaker closes", async () => {
  await withGateway(
    memoryServer("$DATA"),
    MEMORY_POLICY("{ per_minute: 600 }"),
    async ({ gateway }) => {
      const client = await connectHttp(gateway);
      try {
        await client.callTool({ name: "memory__create_entities", arguments: entity });
        const token = await approvedToken(gateway, client);
        const breaker = gateway.kernel.proxy.get("memory")!.breaker;
        while (breaker.state !== "OPEN") breaker.recordFailure();
        const call = () =>
          client.callTool({
            name: "memory__delete_entities",
            arguments: deletion,
            _meta: { [APPROVAL_TOKEN_META_KEY]: token },
          });
        assert.equal((await refusedWith(call())).code, "circuit_open");
        breaker.reset(); // an operator's restart of the circuit
        const done = await call();
        assert.notEqual(done.isError, true, "the approved call runs with the same token");
        const graph = await client.callTool({ name: "memory__read_graph", arguments: {} });
        assert.doesNotMatch(JSON.stringify(graph.content), /probe/);
      } finally {
        await client.close();
      }
    },
    { MCP_APPROVAL_IN_BAND: "false" },
  );
});

Deno.test("Resources, prompts and completion of a connector a tenant may not reach are refused and absent from its lists", async () => {
  const policy = `
tenants:
  "*": {}
connectors:
  everything: { tenants: [acme], effects: [read, write] }
`;
  await withGateway(everythingServer(), policy, async ({ gateway }) => {
    const decisions: GatewayEvent[] = [];
    gateway.kernel.bus.subscribe((e) =>
      void (e.type === "governance.decision" && decisions.push(e))
    );
    const acme = await clientAs(gateway, "acme");
    const globex = await clientAs(gateway, "globex");
    try {
      const { resources } = await acme.listResources();
      const resource = resources.find((r) => r.uri.startsWith("proxy://everything/"));
      assert.ok(resource, "acme sees the upstream's resources");
      const { resourceTemplates } = await acme.listResourceTemplates();
      assert.ok(resourceTemplates.some((t) => t.uriTemplate.startsWith("proxy://everything/")));
      const { prompts } = await acme.listPrompts();
      const prompt = prompts.find((p) => p.name.startsWith("everything__"));
      assert.ok(prompt, "acme sees the upstream's prompts");
      assert.ok((await acme.readResource({ uri: resource.uri })).contents.length > 0);

      assert.ok(
        !(await globex.listResources()).resources.some((r) => r.uri.startsWith("proxy://")),
      );
      assert.ok(
        !(await globex.listResourceTemplates()).resourceTemplates.some((t) =>
          t.uriTemplate.startsWith("proxy://")
        ),
      );
      assert.ok(!(await globex.listPrompts()).prompts.some((p) => p.name.startsWith("everything")));
      const read = await refusedWith(globex.readResource({ uri: resource.uri }));
      assert.equal(read.code, "connector_denied");
      assert.match(read.message, /policy\.yaml:\d+ connector everything/);
      await eventually(
        () =>
          decisions.some((e) =>
            e.type === "governance.decision" && e.surface === "resources/read" &&
            e.tenant === "globex" && e.tool === resource.uri && e.code === "connector_denied"
          ),
        "the refused read in the audit",
      );
      assert.equal(
        (await refusedWith(globex.subscribeResource({ uri: resource.uri }))).code,
        "connector_denied",
      );
      const args = Object.fromEntries((prompt.arguments ?? []).map((a) => [a.name, "x"]));
      assert.equal(
        (await refusedWith(globex.getPrompt({ name: prompt.name, arguments: args }))).code,
        "connector_denied",
      );
      assert.equal(
        (await refusedWith(globex.complete({
          ref: { type: "ref/prompt", name: prompt.name },
          argument: { name: "x", value: "" },
        }))).code,
        "connector_denied",
      );
    } finally {
      await acme.close();
      await globex.close();
    }
  });
});

Deno.test("Policy resources: and prompts: globs allow and deny per tenant, in lists and on use", async () => {
  const policy = `
tenants:
  "*":
    resources: { deny: ["proxy://everything/*"] }
    prompts: { deny: ["everything__*"] }
  acme:
    resources: ["proxy://everything/*", "agent33://*"]
    prompts: ["everything__*"]
`;
  await withGateway(everythingServer(), policy, async ({ gateway }) => {
    const acme = await clientAs(gateway, "acme");
    const other = await clientAs(gateway, "other");
    try {
      const { resources } = await acme.listResources();
      const resource = resources.find((r) => r.uri.startsWith("proxy://everything/"))!;
      assert.ok(resource);
      const prompt = (await acme.listPrompts()).prompts.find((p) =>
        p.name.startsWith("everything__")
      )!;
      assert.ok(prompt);

      assert.ok(!(await other.listResources()).resources.some((r) => r.uri === resource.uri));
      assert.ok(!(await other.listPrompts()).prompts.some((p) => p.name === prompt.name));
      const read = await refusedWith(other.readResource({ uri: resource.uri }));
      assert.equal(read.code, "tool_denied");
      assert.match(read.message, /policy\.yaml:4 resources deny "proxy:\/\/everything\/\*"/);
      const args = Object.fromEntries((prompt.arguments ?? []).map((a) => [a.name, "x"]));
      assert.equal(
        (await refusedWith(other.getPrompt({ name: prompt.name, arguments: args }))).code,
        "tool_denied",
      );
      // The allowlist names agent33://*, so acme keeps the gateway's own resources.
      assert.ok((await acme.listResources()).resources.some((r) => r.uri.startsWith("agent33://")));
      assert.ok(
        (await other.listResources()).resources.some((r) => r.uri.startsWith("agent33://")),
      );
    } finally {
      await acme.close();
      await other.close();
    }
  });
});

Deno.test("Over stdio the desktop user approves in-band by default; a client that cannot ask is told what works over stdio", async () => {
  const dir = await Deno.makeTempDir({ prefix: "agent33-stdio-approval-" });
  await Deno.writeTextFile(`${dir}/policy.yaml`, MEMORY_POLICY("{ per_minute: 600 }"));
  const fleet = await writeFleet(`proxy_servers:${memoryServer(dir)}`);
  const child = spawnStdioGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: `${dir}/policy.yaml`,
  });
  const transport = new StreamTransport(child.stdout, child.stdin, {
    maxMessageBytes: 1 << 20,
    answerMalformed: false,
  });
  const client = new Client({ name: "desktop", version: "1" }, {
    capabilities: { elicitation: {} },
  });
  const asked: string[] = [];
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    asked.push(request.params.message);
    return { action: "accept", content: { approve: true } };
  });
  try {
    await client.connect(transport);
    await eventually(async () => {
      const { tools } = await client.listTools();
      return tools.some((t) => t.name === "memory__delete_entities");
    }, "the memory server");
    await client.callTool({ name: "memory__create_entities", arguments: entity });
    const done = await client.callTool({ name: "memory__delete_entities", arguments: deletion });
    assert.notEqual(done.isError, true);
    assert.equal(asked.length, 1);
    assert.match(asked[0]!, /memory__delete_entities/);

    // A stdio client that cannot ask is told what works over stdio, not an HTTP route.
    const plain = new Client({ name: "plain-desktop", version: "1" });
    const other = spawnStdioGateway({
      MCP_PROXY_CONFIG_PATH: fleet.path,
      MCP_POLICY_PATH: `${dir}/policy.yaml`,
    });
    try {
      await plain.connect(
        new StreamTransport(other.stdout, other.stdin, {
          maxMessageBytes: 1 << 20,
          answerMalformed: false,
        }),
      );
      await eventually(async () => {
        const { tools } = await plain.listTools();
        return tools.some((t) => t.name === "memory__delete_entities");
      }, "the memory server of the second gateway");
      const refused = await refusedWith(
        plain.callTool({ name: "memory__delete_entities", arguments: deletion }),
      );
      assert.equal(refused.code, "approval_required");
      assert.match(refused.message, /over stdio the gateway can only ask you in-band/);
      assert.doesNotMatch(refused.message, /\/v1\//);
    } finally {
      await plain.close();
      await other.close();
    }
  } finally {
    await client.close();
    await child.close();
    await fleet.remove();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("A read of a URI matching a quarantined resource template is refused quarantined", async () => {
  const fleet = POISONED.replace(
    "env: { POISONED_VARIANT: original }",
    "env: { POISONED_VARIANT: original, POISONED_PROMPTS: on }",
  ).replace("env: [POISONED_VARIANT]", "env: [POISONED_VARIANT, POISONED_PROMPTS]");
  await withGateway(fleet, 'tenants:\n  "*": {}\n', async ({ gateway }) => {
    await eventually(
      () =>
        (gateway.kernel.scanner?.findingsFor("poisoned") ?? []).some((f) =>
          f.entity.kind === "resource-template"
        ),
      "the scan of the resource templates",
    );
    const client = await connectHttp(gateway);
    try {
      const templates = (await client.listResourceTemplates()).resourceTemplates;
      assert.ok(templates.some((t) => t.uriTemplate === "proxy://poisoned/notes://{id}"));
      assert.ok(!templates.some((t) => t.uriTemplate.includes("files://")), "hidden");
      // The template is not listed, but its instances are still the upstream's to serve.
      for (const uri of ["proxy://poisoned/files:///etc/passwd", "proxy://poisoned/files://x"]) {
        const refused = await refusedWith(client.readResource({ uri }));
        assert.equal(refused.code, "quarantined");
        assert.match(refused.message, /is quarantined by the scanner/);
        assert.match(refused.message, /its template "files:\/\/\{\+path\}" matches this URI/);
      }
      // What the upstream would resolve to a quarantined instance is refused before any match:
      // scheme case, dot segments (plain or escaped) and control characters.
      for (
        const original of [
          "FILES://x/etc/passwd",
          "Files://x",
          "notes://n1/../../files://x",
          "notes://x/%2e%2e/n1",
          "notes://n\t1",
        ]
      ) {
        const refused = await refusedWith(
          client.readResource({ uri: `proxy://poisoned/${original}` }),
        );
        assert.equal(refused.code, "invalid_arguments", original);
        assert.match(refused.message, /resolves to .*ask for that URI as it is written/);
      }
      const note = await client.readResource({ uri: "proxy://poisoned/notes://n1" });
      assert.match(JSON.stringify(note.contents), /contents of notes:\/\/n1/);
    } finally {
      await client.close();
    }
  }, { MCP_SCANNER_BLOCK: "high" });
});

Deno.test("A prompt with a blocking scanner finding is quarantined: absent from prompts/list, refused by prompts/get", async () => {
  const fleet = POISONED.replace(
    "env: { POISONED_VARIANT: original }",
    "env: { POISONED_VARIANT: original, POISONED_PROMPTS: on }",
  ).replace("env: [POISONED_VARIANT]", "env: [POISONED_VARIANT, POISONED_PROMPTS]");
  await withGateway(fleet, 'tenants:\n  "*": {}\n', async ({ gateway }) => {
    await eventually(
      () =>
        (gateway.kernel.scanner?.findingsFor("poisoned") ?? []).some((f) =>
          f.entity.kind === "prompt"
        ),
      "the scan of the prompts",
    );
    const client = await connectHttp(gateway);
    try {
      const names = (await client.listPrompts()).prompts.map((p) => p.name);
      assert.ok(names.includes("poisoned__greet"), names.join(", "));
      assert.ok(!names.includes("poisoned__summarize"), "the poisoned prompt is hidden");
      const refused = await refusedWith(client.getPrompt({ name: "poisoned__summarize" }));
      assert.equal(refused.code, "quarantined");
      assert.match(refused.message, /Prompt "poisoned__summarize" is quarantined by the scanner/);
      const greeting = await client.getPrompt({ name: "poisoned__greet" });
      assert.equal(greeting.messages.length, 1);
    } finally {
      await client.close();
    }
  }, { MCP_SCANNER_BLOCK: "high" });
});
