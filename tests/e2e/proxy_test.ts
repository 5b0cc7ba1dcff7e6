/**
 * The gateway in front of real upstream MCP servers from npm, each in its sandboxed worker.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  type McpError,
} from "@modelcontextprotocol/sdk/types.js";
import { connect as connectNats } from "nats";
import { StreamTransport } from "../../core/mcp/stream_transport.ts";
import { startEverything } from "../fixtures/upstreams/reference_server.ts";
import { NEEDS_NATS, startNatsServer } from "../support/nats_server.ts";
import { spawnStdioGateway } from "../support/child_gateway.ts";
import { runConformance } from "../support/conformance.ts";
import {
  eventually,
  everythingServer,
  FILESYSTEM,
  fixture,
  MEMORY,
  writeFleet,
} from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

const DEMO_FLEET = `
proxy_servers:${everythingServer()}  - id: memory
    command: ["deno", "run", "${MEMORY}"]
    sandbox: deno
    env:
      MEMORY_FILE_PATH: \${MEMORY_FILE_PATH}
    permissions:
      env: [MEMORY_FILE_PATH]
      read: true
      write: true
`;

async function withFleet(
  yaml: string,
  env: Record<string, string>,
  fn: (gateway: TestGateway, dir: string) => Promise<void>,
): Promise<void> {
  const fleet = await writeFleet(yaml);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path, ...env });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway, fleet.dir);
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
}

Deno.test("The gateway aggregates real npm upstreams under <server_id>__<tool> and forwards calls", async () => {
  const memoryFile = await Deno.makeTempFile({ suffix: ".json" });
  Deno.env.set("MEMORY_FILE_PATH", memoryFile);
  try {
    await withFleet(DEMO_FLEET, {}, async (gateway) => {
      const states = gateway.kernel.proxy.status().map((s) => [s.id, s.state]);
      assert.deepEqual(states, [["everything", "READY"], ["memory", "READY"]]);
      const client = await connectHttp(gateway);
      try {
        const names = (await client.listTools()).tools.map((t) => t.name);
        assert.ok(names.includes("system_status"));
        assert.ok(names.includes("everything__echo"));
        assert.ok(names.includes("memory__create_entities"));

        const echo = await client.callTool({
          name: "everything__echo",
          arguments: { message: "hi" },
        });
        assert.deepEqual(echo.content, [{ type: "text", text: "Echo: hi" }]);

        await client.callTool({
          name: "memory__create_entities",
          arguments: {
            entities: [{ name: "gateway", entityType: "software", observations: ["proxies MCP"] }],
          },
        });
        const graph = await client.callTool({ name: "memory__read_graph", arguments: {} });
        assert.match(JSON.stringify(graph.content), /proxies MCP/);

        const status = await client.callTool({ name: "system_status", arguments: {} });
        assert.equal((status.structuredContent as { proxies: number }).proxies, 2);
      } finally {
        await client.close();
      }
    });
  } finally {
    Deno.env.delete("MEMORY_FILE_PATH");
    await Deno.remove(memoryFile);
  }
});

Deno.test("Upstream resources, templates, prompts and completion are served namespaced", async () => {
  const fleet = DEMO_FLEET.split("  - id: memory")[0]!;
  await withFleet(fleet, {}, async (gateway) => {
    const client = await connectHttp(gateway);
    try {
      const { resources } = await client.listResources();
      const doc = resources.find((r) =>
        r.uri === "proxy://everything/demo://resource/static/document/architecture.md"
      );
      assert.ok(doc, "the upstream's resource is listed under proxy://everything/");
      const read = await client.readResource({ uri: doc.uri });
      assert.equal(read.contents[0]?.uri, doc.uri);
      assert.ok(((read.contents[0] as { text?: string }).text ?? "").length > 0);

      const { resourceTemplates } = await client.listResourceTemplates();
      assert.ok(
        resourceTemplates.some((t) =>
          t.uriTemplate === "proxy://everything/demo://resource/dynamic/text/{resourceId}"
        ),
      );
      const dynamic = await client.readResource({
        uri: "proxy://everything/demo://resource/dynamic/text/1",
      });
      assert.ok(dynamic.contents.length > 0);

      const { prompts } = await client.listPrompts();
      assert.ok(prompts.some((p) => p.name === "everything__simple-prompt"));
      const prompt = await client.getPrompt({
        name: "everything__args-prompt",
        arguments: { city: "Paris" },
      });
      assert.match(JSON.stringify(prompt.messages), /Paris/);
    } finally {
      await client.close();
    }
  });
});

Deno.test("Progress from an upstream reaches the inbound client, every notification before the result", async () => {
  const fleet = DEMO_FLEET.split("  - id: memory")[0]!;
  await withFleet(fleet, {}, async (gateway) => {
    const client = await connectHttp(gateway);
    try {
      const seen: number[] = [];
      const result = await client.callTool(
        {
          name: "everything__trigger-long-running-operation",
          arguments: { duration: 0.5, steps: 5 },
        },
        undefined,
        { onprogress: (p) => seen.push(p.progress) },
      );
      assert.deepEqual(seen, [1, 2, 3, 4, 5]);
      assert.match(JSON.stringify(result.content), /completed/i);
    } finally {
      await client.close();
    }
  });
});

Deno.test("Sampling and elicitation requests from an upstream are relayed to the calling client", async () => {
  const fleet = DEMO_FLEET.split("  - id: memory")[0]!;
  await withFleet(fleet, {}, async (gateway) => {
    const client = new Client(
      { name: "relay-e2e", version: "1" },
      { capabilities: { sampling: {}, elicitation: {} } },
    );
    client.setRequestHandler(CreateMessageRequestSchema, () => ({
      role: "assistant",
      content: { type: "text", text: "sampled by the inbound client" },
      model: "test-model",
      stopReason: "endTurn",
    }));
    client.setRequestHandler(ElicitRequestSchema, () => ({
      action: "accept",
      content: { color: "blue", number: 7, pets: "cats" },
    }));
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${gateway.token}` } },
      }),
    );
    try {
      const sampled = await client.callTool({
        name: "everything__trigger-sampling-request",
        arguments: { prompt: "hello", maxTokens: 10 },
      });
      assert.match(JSON.stringify(sampled.content), /sampled by the inbound client/);
      const elicited = await client.callTool({
        name: "everything__trigger-elicitation-request",
        arguments: {},
      });
      assert.match(JSON.stringify(elicited.content), /accept/);
    } finally {
      await client.close();
    }
  });
});

Deno.test("A relayed sampling request to a client without the capability gets a clear error", async () => {
  const fleet = DEMO_FLEET.split("  - id: memory")[0]!;
  await withFleet(fleet, {}, async (gateway) => {
    const client = await connectHttp(gateway); // declares no sampling capability
    try {
      const result = await client.callTool({
        name: "everything__trigger-sampling-request",
        arguments: { prompt: "hello", maxTokens: 10 },
      }).catch((e: McpError) => ({ error: e.message }));
      assert.match(JSON.stringify(result), /sampling/);
      // The session and the upstream still work.
      const echo = await client.callTool({
        name: "everything__echo",
        arguments: { message: "ok" },
      });
      assert.deepEqual(echo.content, [{ type: "text", text: "Echo: ok" }]);
    } finally {
      await client.close();
    }
  });
});

Deno.test("Cancelling a call through the gateway leaves the upstream serving and the breaker closed", async () => {
  const fleet = DEMO_FLEET.split("  - id: memory")[0]!;
  await withFleet(fleet, {}, async (gateway) => {
    const client = await connectHttp(gateway);
    try {
      const controller = new AbortController();
      const call = client.callTool(
        {
          name: "everything__trigger-long-running-operation",
          arguments: { duration: 30, steps: 30 },
        },
        undefined,
        { signal: controller.signal, onprogress: () => controller.abort("enough") },
      );
      await assert.rejects(call);
      const echo = await client.callTool({
        name: "everything__echo",
        arguments: { message: "after" },
      });
      assert.deepEqual(echo.content, [{ type: "text", text: "Echo: after" }]);
      const [everything] = gateway.kernel.proxy.status();
      assert.equal(everything?.breaker.state, "CLOSED");
      assert.equal(everything?.breaker.consecutiveFailures, 0);
    } finally {
      await client.close();
    }
  });
});

Deno.test("server-filesystem behind the gateway lists only the directory it was given", async () => {
  const root = await Deno.makeTempDir({ prefix: "agent33-fs-" });
  await Deno.writeTextFile(`${root}/hello.txt`, "hello");
  const yaml = `
proxy_servers:
  - id: fs
    command: ["deno", "run", "${FILESYSTEM}", "${root}"]
    sandbox: deno
    permissions:
      read: ["${root}"]
      write: ["${root}"]
      env: true
      sys: true
`;
  try {
    await withFleet(yaml, {}, async (gateway) => {
      const client = await connectHttp(gateway);
      try {
        const listing = await client.callTool({
          name: "fs__list_directory",
          arguments: { path: root },
        });
        assert.match(JSON.stringify(listing.content), /hello\.txt/);
        const outside = await client.callTool({
          name: "fs__read_text_file",
          arguments: { path: "/etc/hostname" },
        });
        assert.equal(outside.isError, true);
      } finally {
        await client.close();
      }
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("Each upstream is reachable alone at /mcp/<server_id>: the whole conformance suite passes through the gateway", async () => {
  const yaml = `
proxy_servers:
  - id: conformance
    command: ["deno", "run", "--config", "${DENO_JSON}", "${fixture("conformance_server.ts")}"]
    sandbox: deno
    permissions:
      read: true
`;
  const fleet = await writeFleet(yaml);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path }, { noAuth: true });
  try {
    await gateway.kernel.fleetStarted;
    assert.equal(gateway.kernel.proxy.get("conformance")?.state, "READY");
    const run = await runConformance(`${gateway.url}/mcp/conformance`, { suite: "all" });
    const failed = run.results.filter((r) => r.failed > 0);
    assert.deepEqual(failed, [], `conformance failures through the gateway:\n${run.text}`);
    assert.ok(run.passed >= 40, `expected the whole suite to run, got ${run.passed} checks`);
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
});

Deno.test("stdio inbound → stdio upstream: a desktop client sees proxied tools", async () => {
  const fleet = await writeFleet(DEMO_FLEET.split("  - id: memory")[0]!);
  const child = spawnStdioGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  const client = new Client({ name: "stdio-proxy", version: "1" });
  try {
    const changed = Promise.withResolvers<void>();
    client.setNotificationHandler(
      (await import("@modelcontextprotocol/sdk/types.js")).ToolListChangedNotificationSchema,
      () => changed.resolve(),
    );
    await client.connect(
      new StreamTransport(child.stdout, child.stdin, {
        maxMessageBytes: 1 << 24,
        answerMalformed: false,
      }),
    );
    let names = (await client.listTools()).tools.map((t) => t.name);
    if (!names.includes("everything__echo")) {
      await changed.promise; // upstreams start in the background; list_changed says when
      names = (await client.listTools()).tools.map((t) => t.name);
    }
    assert.ok(names.includes("everything__echo"));
    const echo = await client.callTool({
      name: "everything__echo",
      arguments: { message: "desk" },
    });
    assert.deepEqual(echo.content, [{ type: "text", text: "Echo: desk" }]);
  } finally {
    await client.close();
    await child.process.status;
    await child.stderr;
    await fleet.remove();
  }
});

for (const [transport, mode] of [["http", "streamableHttp"], ["sse", "sse"]] as const) {
  Deno.test(`A ${transport} upstream (server-everything over ${mode}) is proxied like a stdio one`, async () => {
    const upstream = await startEverything(mode);
    try {
      const yaml = `
proxy_servers:
  - id: remote
    url: ${upstream.url}
    transport: ${transport}
`;
      await withFleet(yaml, {}, async (gateway) => {
        assert.equal(gateway.kernel.proxy.get("remote")?.state, "READY");
        const client = await connectHttp(gateway);
        try {
          const echo = await client.callTool({
            name: "remote__echo",
            arguments: { message: "far" },
          });
          assert.deepEqual(echo.content, [{ type: "text", text: "Echo: far" }]);
        } finally {
          await client.close();
        }
      });
    } finally {
      await upstream.stop();
    }
  });
}

Deno.test(
  "With NATS_URL set, upstream lifecycle events are published on agent33.mcp.proxy.<id>.state",
  NEEDS_NATS,
  async () => {
    const nats = await startNatsServer();
    const connection = await connectNats({ servers: nats.url });
    const seen: { subject: string; event: Record<string, unknown> }[] = [];
    const subscription = connection.subscribe("agent33.mcp.proxy.>");
    const reading = (async () => {
      for await (const message of subscription) {
        seen.push({ subject: message.subject, event: message.json() });
      }
    })();
    const fleet = DEMO_FLEET.split("  - id: memory")[0]!;
    try {
      await withFleet(fleet, { NATS_URL: nats.url }, async () => {
        await eventually(
          () =>
            seen.some((m) =>
              m.subject === "agent33.mcp.proxy.everything.state" && m.event.to === "READY"
            ),
          "the READY event on NATS",
        );
      });
      const states = seen.filter((m) => m.subject === "agent33.mcp.proxy.everything.state")
        .map((m) => m.event.to);
      assert.deepEqual(states.slice(0, 2), ["STARTING", "READY"]);
    } finally {
      subscription.unsubscribe();
      await reading;
      await connection.close();
      await nats.stop();
    }
  },
);

Deno.test("isolation: inline relays a stdio upstream in the kernel's thread: calls, progress and a clean stop", async () => {
  const fleet = DEMO_FLEET.split("  - id: memory")[0]!.replace(
    "    sandbox: deno\n",
    "    sandbox: deno\n    isolation: inline\n",
  );
  assert.match(fleet, /isolation: inline/);
  let pid: number | undefined;
  await withFleet(fleet, {}, async (gateway) => {
    assert.equal(gateway.kernel.proxy.get("everything")?.state, "READY");
    const client = await connectHttp(gateway);
    try {
      const echo = await client.callTool({
        name: "everything__echo",
        arguments: { message: "inline" },
      });
      assert.deepEqual(echo.content, [{ type: "text", text: "Echo: inline" }]);
      const seen: number[] = [];
      await client.callTool(
        {
          name: "everything__trigger-long-running-operation",
          arguments: { duration: 0.3, steps: 3 },
        },
        undefined,
        { onprogress: (p) => seen.push(p.progress) },
      );
      assert.deepEqual(seen, [1, 2, 3]);
      const line = gateway.logs.find((l) => /upstream started server=everything pid=\d+/.test(l));
      pid = Number(/pid=(\d+)/.exec(line ?? "")?.[1]);
      assert.ok(pid > 0, "the child's pid is logged");
    } finally {
      await client.close();
    }
  });
  // The gateway stopped: the inline relay's child is gone like a worker's.
  assert.ok(!(await Deno.stat(`/proc/${pid}`).then(() => true, () => false)), "no orphan");
});
