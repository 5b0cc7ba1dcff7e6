/**
 * OpenTelemetry traces, end to end: an SDK client over Streamable HTTP sends a W3C traceparent,
 * the gateway exports its spans over OTLP/HTTP to a receiver run in the test, and a real stdio
 * upstream (in `_meta`) and a real HTTP upstream (in its headers) see the same trace.
 * @module
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type CallToolResult, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { startHeaderEchoServer } from "../fixtures/upstreams/header_echo_server.ts";
import { fixture, writeFleet } from "../support/fleet.ts";
import { openSession, startGateway, type TestGateway } from "../support/gateway.ts";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  startOtlpReceiver,
} from "../support/otlp_receiver.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** The client's own span: what its traceparent names as the parent of the gateway's span. */
const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";
const CLIENT_TRACEPARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;
const HEADER_TRACE = "0af7651916cd43dd8448eb211c80319c";
const HEADER_SPAN = "b7ad6b7169203331";

function text(result: unknown): string {
  const content = (result as CallToolResult).content[0];
  assert.ok(content?.type === "text", "the tool answers with text");
  return content.text;
}

/** The trace context in a traceparent: its trace id and parent span id. */
function parsed(traceparent: unknown): { traceId: string; parentId: string } {
  assert.equal(typeof traceparent, "string", "a traceparent was sent");
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(traceparent as string);
  assert.ok(match, `a W3C traceparent: ${traceparent}`);
  return { traceId: match[1]!, parentId: match[2]! };
}

async function withTracedGateway(
  fn: (gateway: TestGateway, receiver: OtlpReceiver) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  const receiver = startOtlpReceiver();
  const echo = startHeaderEchoServer();
  const command = [
    "deno",
    "run",
    "--config",
    `${ROOT}deno.json`,
    fixture("upstreams/meta_echo_server.ts"),
  ];
  const fleet = await writeFleet(`proxy_servers:
  - id: meta
    command: ${JSON.stringify(command)}
    sandbox: deno
    permissions: { read: true }
  - id: echo
    url: ${echo.url}
`);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_SERVICE_NAME: "agent33-under-test",
    ...env,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway, receiver);
  } finally {
    await gateway.stop();
    await fleet.remove();
    await echo.close();
    await receiver.close();
  }
}

async function connect(
  gateway: TestGateway,
  headers: Record<string, string> = {},
  approve?: () => boolean,
): Promise<Client> {
  const client = new Client(
    { name: "traced-client", version: "1.0.0" },
    approve ? { capabilities: { elicitation: {} } } : {},
  );
  if (approve) {
    client.setRequestHandler(ElicitRequestSchema, () => ({
      action: "accept" as const,
      content: { approve: approve() },
    }));
  }
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${gateway.token}`, ...headers } },
    }),
  );
  return client;
}

/** The spans of one trace, after the gateway flushed what it buffered. */
async function traceOf(gateway: TestGateway, receiver: OtlpReceiver, traceId: string) {
  await gateway.kernel.tracing.tracer!.flush();
  const spans = receiver.spans.filter((s) => s.traceId === traceId);
  const named = (name: string) => {
    const found = spans.filter((s) => s.name === name);
    assert.equal(
      found.length,
      1,
      `one "${name}" span in ${JSON.stringify(spans.map((s) => s.name))}`,
    );
    return found[0]!;
  };
  return { spans, named };
}

function assertChild(child: ReceivedSpan, parent: ReceivedSpan): void {
  assert.equal(child.parentSpanId, parent.spanId, `"${child.name}" is a child of "${parent.name}"`);
}

Deno.test("A client call with _meta.traceparent yields one connected trace into a stdio upstream, which gets the trace in _meta", async () => {
  await withTracedGateway(async (gateway, receiver) => {
    const client = await connect(gateway);
    try {
      const result = await client.callTool({
        name: "meta__meta",
        arguments: {},
        _meta: { traceparent: CLIENT_TRACEPARENT, tracestate: "vendor=opaque,other=1" },
      });
      const seen = JSON.parse(text(result)) as Record<string, unknown>;
      const { named } = await traceOf(gateway, receiver, CLIENT_TRACE);
      const request = named("tools/call meta__meta");
      assert.equal(
        request.parentSpanId,
        CLIENT_SPAN,
        "the gateway's span is the client span's child",
      );
      assert.equal(request.kind, 2, "a server span");
      assert.equal(request.service, "agent33-under-test");
      assert.deepEqual(
        {
          method: request.attributes["mcp.method.name"],
          tool: request.attributes["gen_ai.tool.name"],
          transport: request.attributes["agent33.transport"],
          tenant: request.attributes["agent33.tenant"],
          verdict: request.attributes["agent33.verdict"],
          upstream: request.attributes["agent33.upstream"],
          breaker: request.attributes["agent33.breaker.state"],
          outcome: request.attributes["agent33.outcome"],
        },
        {
          method: "tools/call",
          tool: "meta__meta",
          transport: "streamable-http",
          tenant: "default",
          verdict: "allow",
          upstream: "meta",
          breaker: "CLOSED",
          outcome: "ok",
        },
      );
      const governance = named("governance");
      assertChild(governance, request);
      assert.equal(governance.attributes["agent33.verdict"], "allow");
      const upstream = named("tools/call meta");
      assertChild(upstream, request);
      assert.equal(upstream.kind, 3, "a client span");
      assert.equal(upstream.attributes["agent33.upstream"], "meta");
      // The stdio upstream got the gateway's upstream span as its parent, in the same trace.
      const sent = parsed(seen.traceparent);
      assert.equal(sent.traceId, CLIENT_TRACE);
      assert.equal(sent.parentId, upstream.spanId);
      // The caller's tracestate travels on unchanged, and nothing else of its _meta does.
      assert.equal(seen.tracestate, "vendor=opaque,other=1");
      assert.deepEqual(Object.keys(seen).sort(), ["traceparent", "tracestate"]);
    } finally {
      await client.close();
    }
  });
});

Deno.test("With protobuf export (OTLP's default) the same call yields the same connected trace, attributes and all", async () => {
  await withTracedGateway(async (gateway, receiver) => {
    const client = await connect(gateway);
    try {
      const result = await client.callTool({
        name: "meta__meta",
        arguments: {},
        _meta: { traceparent: CLIENT_TRACEPARENT },
      });
      const seen = JSON.parse(text(result)) as Record<string, unknown>;
      const { named } = await traceOf(gateway, receiver, CLIENT_TRACE);
      assert.ok(receiver.contentTypes.every((t) => t === "application/x-protobuf"));
      const request = named("tools/call meta__meta");
      assert.equal(request.parentSpanId, CLIENT_SPAN);
      assert.equal(request.kind, 2);
      assert.equal(request.service, "agent33-under-test");
      assert.equal(request.attributes["agent33.transport"], "streamable-http");
      assert.equal(request.attributes["agent33.upstream"], "meta");
      assert.equal(request.attributes["agent33.outcome"], "ok");
      assert.equal(request.status, 0);
      assertChild(named("governance"), request);
      const upstream = named("tools/call meta");
      assertChild(upstream, request);
      assert.equal(upstream.attributes["agent33.upstream.transport"], "stdio");
      assert.equal(parsed(seen.traceparent).parentId, upstream.spanId);
    } finally {
      await client.close();
    }
  }, { OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" });
});

Deno.test("A client's request id is kept on its span to at most 256 characters", async () => {
  await withTracedGateway(async (gateway, receiver) => {
    const headers = await openSession(gateway);
    const trace = "5bf92f3577b34da6a3ce929d0e0e4737";
    const answer = await fetch(`${gateway.url}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: "r".repeat(10_000),
        method: "tools/call",
        params: {
          name: "meta__meta",
          arguments: {},
          _meta: { traceparent: `00-${trace}-${CLIENT_SPAN}-01` },
        },
      }),
    });
    assert.equal(answer.status, 200);
    await answer.text();
    const { named } = await traceOf(gateway, receiver, trace);
    assert.equal(named("tools/call meta__meta").attributes["jsonrpc.request.id"], "r".repeat(256));
  });
});

Deno.test("A client's traceparent and tracestate headers reach a Streamable HTTP upstream as headers of the same trace", async () => {
  await withTracedGateway(async (gateway, receiver) => {
    const client = await connect(gateway, {
      traceparent: `00-${HEADER_TRACE}-${HEADER_SPAN}-01`,
      tracestate: "vendor=from-header",
    });
    try {
      const result = await client.callTool({ name: "echo__headers", arguments: {} });
      const headers = JSON.parse(text(result)) as Record<string, string>;
      const { named } = await traceOf(gateway, receiver, HEADER_TRACE);
      const request = named("tools/call echo__headers");
      assert.equal(request.parentSpanId, HEADER_SPAN);
      assertChild(named("governance"), request);
      const upstream = named("tools/call headers");
      assertChild(upstream, request);
      assert.equal(upstream.attributes["agent33.upstream.transport"], "http");
      const sent = parsed(headers.traceparent);
      assert.equal(sent.traceId, HEADER_TRACE);
      assert.equal(sent.parentId, upstream.spanId);
      assert.equal(headers.tracestate, "vendor=from-header");
    } finally {
      await client.close();
    }
  });
});

Deno.test("A caller's unsampled trace reaches stdio and HTTP upstreams unsampled, and the gateway exports none of it", async () => {
  await withTracedGateway(async (gateway, receiver) => {
    const unsampled = `00-${HEADER_TRACE}-${HEADER_SPAN}-00`;
    const client = await connect(gateway, { traceparent: unsampled });
    try {
      const meta = await client.callTool({
        name: "meta__meta",
        arguments: {},
        _meta: { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-00`, tracestate: "v=1" },
      });
      const seen = JSON.parse(text(meta)) as Record<string, string>;
      assert.match(seen.traceparent!, new RegExp(`^00-${CLIENT_TRACE}-[0-9a-f]{16}-00$`));
      assert.notEqual(seen.traceparent!.split("-")[2], CLIENT_SPAN, "the gateway's own span id");
      assert.equal(seen.tracestate, "v=1");
      const headers = JSON.parse(
        text(await client.callTool({ name: "echo__headers", arguments: {} })),
      ) as Record<string, string>;
      assert.match(headers.traceparent!, new RegExp(`^00-${HEADER_TRACE}-[0-9a-f]{16}-00$`));
      await gateway.kernel.tracing.tracer!.flush();
      const exported = receiver.spans.filter((s) =>
        s.traceId === CLIENT_TRACE || s.traceId === HEADER_TRACE
      );
      assert.deepEqual(exported.map((s) => s.name), [], "no span of an unsampled trace");
    } finally {
      await client.close();
    }
  });
});

/** The gateway's server span and its one client span to the upstream, in one trace. */
async function forwarded(
  gateway: TestGateway,
  receiver: OtlpReceiver,
  traceId: string,
  requestName: string,
  upstreamName: string,
) {
  const { spans } = await traceOf(gateway, receiver, traceId);
  const request = spans.filter((s) => s.name === requestName && s.kind === 2);
  const upstream = spans.filter((s) => s.name === upstreamName && s.kind === 3);
  const names = JSON.stringify(spans.map((s) => [s.name, s.kind]));
  assert.equal(request.length, 1, `one "${requestName}" server span in ${names}`);
  assert.equal(upstream.length, 1, `one "${upstreamName}" client span in ${names}`);
  assertChild(upstream[0]!, request[0]!);
  return { request: request[0]!, upstream: upstream[0]! };
}

Deno.test("A resources/read and a prompts/get yield connected traces into a stdio upstream, which gets the trace in _meta", async () => {
  await withTracedGateway(async (gateway, receiver) => {
    const client = await connect(gateway);
    try {
      const read = await client.readResource({
        uri: "proxy://meta/meta://echo",
        _meta: { traceparent: CLIENT_TRACEPARENT, tracestate: "vendor=opaque" },
      });
      const readSeen = JSON.parse((read.contents[0] as { text: string }).text);
      const reading = await forwarded(
        gateway,
        receiver,
        CLIENT_TRACE,
        "resources/read",
        "resources/read",
      );
      assert.equal(reading.request.parentSpanId, CLIENT_SPAN);
      assert.equal(reading.request.attributes["agent33.upstream"], "meta");
      assert.equal(reading.upstream.attributes["mcp.resource.uri"], "meta://echo");
      assert.equal(reading.upstream.attributes["agent33.upstream.transport"], "stdio");
      const sentRead = parsed(readSeen.traceparent);
      assert.equal(sentRead.traceId, CLIENT_TRACE);
      assert.equal(sentRead.parentId, reading.upstream.spanId);
      assert.deepEqual(readSeen, {
        traceparent: readSeen.traceparent,
        tracestate: "vendor=opaque",
      });

      const prompt = await client.getPrompt({
        name: "meta__meta",
        _meta: { traceparent: `00-${HEADER_TRACE}-${HEADER_SPAN}-01` },
      });
      const content = prompt.messages[0]!.content;
      assert.ok(content.type === "text");
      const promptSeen = JSON.parse(content.text);
      const getting = await forwarded(
        gateway,
        receiver,
        HEADER_TRACE,
        "prompts/get",
        "prompts/get meta",
      );
      assert.equal(getting.request.parentSpanId, HEADER_SPAN);
      assert.equal(getting.upstream.attributes["gen_ai.prompt.name"], "meta");
      const sentPrompt = parsed(promptSeen.traceparent);
      assert.equal(sentPrompt.traceId, HEADER_TRACE);
      assert.equal(sentPrompt.parentId, getting.upstream.spanId);
      assert.deepEqual(Object.keys(promptSeen), ["traceparent"]);
    } finally {
      await client.close();
    }
  });
});

Deno.test("A resources/read of a Streamable HTTP upstream carries the trace in its headers", async () => {
  await withTracedGateway(async (gateway, receiver) => {
    const client = await connect(gateway, { traceparent: `00-${HEADER_TRACE}-${HEADER_SPAN}-01` });
    try {
      const read = await client.readResource({ uri: "proxy://echo/echo://headers" });
      const headers = JSON.parse((read.contents[0] as { text: string }).text);
      const { upstream } = await forwarded(
        gateway,
        receiver,
        HEADER_TRACE,
        "resources/read",
        "resources/read",
      );
      assert.equal(upstream.attributes["agent33.upstream.transport"], "http");
      const sent = parsed(headers.traceparent);
      assert.equal(sent.traceId, HEADER_TRACE);
      assert.equal(sent.parentId, upstream.spanId);
    } finally {
      await client.close();
    }
  });
});

Deno.test("A workflow run through workflow_run traces each step's tool call as a child of the request, down to the upstream", async () => {
  const workflows = await Deno.makeTempDir({ prefix: "agent33-tracing-workflows-" });
  await Deno.writeTextFile(
    `${workflows}/twice.yaml`,
    `id: twice
name: Twice
description: Calls the meta tool twice
steps:
  - id: first
    tool: meta__meta
  - id: second
    tool: meta__meta
`,
  );
  try {
    await withTracedGateway(async (gateway, receiver) => {
      const client = await connect(gateway);
      try {
        const result = await client.callTool({
          name: "workflow_run",
          arguments: { workflow: "twice" },
          _meta: { traceparent: CLIENT_TRACEPARENT },
        });
        const run = result.structuredContent as { status: string; steps: { text: string }[] };
        assert.equal(run.status, "completed");
        const { spans, named } = await traceOf(gateway, receiver, CLIENT_TRACE);
        const request = named("tools/call workflow_run");
        assert.equal(request.parentSpanId, CLIENT_SPAN);
        const steps = spans.filter((s) => s.name === "tools/call meta__meta");
        assert.deepEqual(steps.map((s) => s.attributes["agent33.workflow.step"]), [
          "first",
          "second",
        ]);
        steps.forEach((step, i) => {
          assertChild(step, request);
          assert.equal(step.kind, 1, "an internal span");
          assert.equal(step.attributes["agent33.outcome"], "ok");
          assert.equal(step.attributes["agent33.verdict"], "allow");
          const below = spans.filter((s) => s.parentSpanId === step.spanId);
          assert.deepEqual(below.map((s) => s.name).sort(), ["governance", "tools/call meta"]);
          const upstream = below.find((s) => s.name === "tools/call meta")!;
          // The upstream sees the step's own upstream span as its parent.
          const sent = parsed(JSON.parse(run.steps[i]!.text).traceparent);
          assert.equal(sent.traceId, CLIENT_TRACE);
          assert.equal(sent.parentId, upstream.spanId);
        });
      } finally {
        await client.close();
      }
    }, { MCP_WORKFLOWS_PATH: workflows });
  } finally {
    await Deno.remove(workflows, { recursive: true });
  }
});

Deno.test("A refused call's span carries the refusal's code, and a malformed traceparent starts a trace of the gateway's own", async () => {
  await withTracedGateway(async (gateway, receiver) => {
    const client = await connect(gateway);
    try {
      const bad = `00-${"0".repeat(32)}-${CLIENT_SPAN}-01`; // an all-zero trace id is invalid
      await assert.rejects(
        client.callTool({ name: "nope__nothing", arguments: {}, _meta: { traceparent: bad } }),
        /Unknown tool/,
      );
      await gateway.kernel.tracing.tracer!.flush();
      const refused = receiver.spans.filter((s) => s.name === "tools/call nope__nothing");
      assert.equal(refused.length, 1);
      assert.equal(
        refused[0]!.parentSpanId,
        undefined,
        "no parent taken from a malformed traceparent",
      );
      assert.notEqual(refused[0]!.traceId, "0".repeat(32));
      assert.equal(refused[0]!.attributes["error.type"], "unknown_tool");
      assert.equal(refused[0]!.attributes["agent33.outcome"], "error");
      assert.equal(refused[0]!.status, 2, "an error status");
      assert.ok(receiver.contentTypes.every((t) => t.startsWith("application/json")));
    } finally {
      await client.close();
    }
  });
});

Deno.test("An in-band approval is a span of its own under the call, between governance and the upstream", async () => {
  const policies = await Deno.makeTempDir({ prefix: "agent33-tracing-policy-" });
  await Deno.writeTextFile(
    `${policies}/policy.yaml`,
    `tenants:
  "*":
    effects: { meta__meta: destructive }
    approval: { effects: [destructive], by: in_band }
`,
  );
  try {
    await withTracedGateway(async (gateway, receiver) => {
      const client = await connect(gateway, {}, () => true);
      try {
        await client.callTool({
          name: "meta__meta",
          arguments: {},
          _meta: { traceparent: CLIENT_TRACEPARENT },
        });
        const { named } = await traceOf(gateway, receiver, CLIENT_TRACE);
        const request = named("tools/call meta__meta");
        const governance = named("governance");
        const approval = named("approval");
        const upstream = named("tools/call meta");
        for (const child of [governance, approval, upstream]) assertChild(child, request);
        assert.equal(governance.attributes["agent33.verdict"], "approval_required");
        assert.equal(approval.attributes["agent33.approval.by"], "in_band");
        assert.equal(approval.attributes["agent33.verdict"], "allow");
        assert.equal(request.attributes["agent33.verdict"], "allow");
      } finally {
        await client.close();
      }
    }, { MCP_POLICY_PATH: policies });
  } finally {
    await Deno.remove(policies, { recursive: true });
  }
});

Deno.test("Without OTEL_* settings the gateway starts no tracer", async () => {
  const gateway = await startGateway();
  try {
    assert.equal(gateway.kernel.tracing.tracer, undefined);
    assert.equal(gateway.kernel.config.tracing.enabled, false);
  } finally {
    await gateway.stop();
  }
});
