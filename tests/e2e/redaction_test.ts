/**
 * No secret leaves through diagnostics: a credential planted in every field of every fleet entry
 * (URL userinfo and query, headers, env, command arguments) of http, sse and stdio upstreams that
 * fail, log and answer errors appears nowhere an operator or a client can read — the operator and
 * admin API, the event bus and its SSE stream, the log, /metrics, and what an SDK client receives.
 */
import assert from "node:assert/strict";
import type { GatewayEvent } from "../../core/bus/events.ts";
import { eventually, fixture, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway } from "../support/gateway.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** A distinct credential per server and field, long enough to be registered as a value. */
const cred = (server: string, field: string) => `${field}-${server}-S3cr3t`;
const FIELDS = ["urluser", "urlpass", "query", "header", "apikey", "interp"];

function closedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

function remoteEntry(id: string, transport: "http" | "sse", port: number): string {
  const c = (f: string) => cred(id, f);
  return `
  - id: ${id}
    transport: ${transport}
    url: "http://${c("urluser")}:${c("urlpass")}@127.0.0.1:${port}/mcp?token=${c("query")}&page=1"
    headers:
      Authorization: "Bearer ${c("header")}"
      X-Api-Key: "${c("apikey")}"
      X-Interp: "\${REDACTION_TEST_${id.toUpperCase()}}"
    timeouts: { connect: 2, call: 5 }
    breaker: { threshold: 5, base: 60, max: 60 }
`;
}

const STDIO_FIELDS = ["env", "interp", "arg", "flag", "argurl"];

function stdioEntry(id: string): string {
  const c = (f: string) => cred(id, f);
  const command = [
    "deno",
    "run",
    "-A",
    "--config",
    `${ROOT}deno.json`,
    fixture("upstreams/leaky_server.ts"),
    "--api-key",
    c("arg"),
    `--token=${c("flag")}`,
    `--upstream=http://someone:${c("argurl")}@127.0.0.1:1/x`,
  ];
  return `
  - id: ${id}
    command: ${JSON.stringify(command)}
    env:
      LEAKY_PLAIN: "${c("env")}"
      LEAKY_FROM_VARIABLE: "\${REDACTION_TEST_${id.toUpperCase()}}"
    breaker: { threshold: 5, base: 60, max: 60 }
`;
}

Deno.test("Credentials planted in every field of http, sse and stdio fleet entries appear nowhere but the fleet file", async () => {
  const port = closedPort();
  const secrets = [
    ...FIELDS.map((f) => cred("web", f)),
    ...FIELDS.map((f) => cred("legacy", f)),
    ...STDIO_FIELDS.map((f) => cred("leaky", f)),
  ];
  for (const id of ["web", "legacy", "leaky"]) {
    Deno.env.set(`REDACTION_TEST_${id.toUpperCase()}`, cred(id, "interp"));
  }
  const fleet = await writeFleet(
    `proxy_servers:${remoteEntry("web", "http", port)}${remoteEntry("legacy", "sse", port)}${
      stdioEntry("leaky")
    }`,
  );
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  const events: GatewayEvent[] = [];
  const unsubscribe = gateway.kernel.bus.subscribe((e) => events.push(e));
  const auth = { Authorization: `Bearer ${gateway.token}` };
  const stream = await fetch(`${gateway.url}/v1/events`, { headers: auth });
  const reader = stream.body!.getReader();
  let streamed = "";
  const decoder = new TextDecoder();
  const pumping = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      streamed += decoder.decode(value, { stream: true });
    }
  })();
  const seenByClient: string[] = [];
  try {
    await gateway.kernel.fleetStarted;
    const client = await connectHttp(gateway);
    try {
      for (const name of ["leaky__fail", "leaky__reject", "leaky__crash"]) {
        try {
          seenByClient.push(JSON.stringify(await client.callTool({ name, arguments: {} })));
        } catch (error) {
          const e = error as { message: string; data?: unknown };
          seenByClient.push(e.message, JSON.stringify(e.data ?? null));
        }
      }
      await eventually(
        () => gateway.kernel.proxy.get("leaky")!.snapshot().lastError?.includes("fatal") ?? false,
        "the crashed child's stderr in its last error",
      );
      // Not vacuous: the child's stderr quoting its env was kept, redacted before it was cut.
      const raw = gateway.kernel.proxy.get("leaky")!.snapshot().lastError!;
      assert.ok(raw.includes("LEAKY_PLAIN=[redacted]"), "the child's stderr quotes its env");
      for (const id of ["web", "legacy"]) {
        await eventually(
          () => gateway.kernel.proxy.get(id)!.snapshot().state === "FAILED",
          `${id} failing to connect`,
        );
      }
      await eventually(() => streamed.includes('"FAILED"'), "FAILED on the events stream");
    } finally {
      await client.close();
    }
    const bodies: string[] = [];
    for (
      const path of [
        "/v1/operator/status",
        "/v1/mcp/status",
        "/v1/mcp/config",
        "/v1/mcp/proxy/servers",
        "/v1/mcp/proxy/servers/web",
        "/v1/mcp/proxy/servers/legacy",
        "/v1/mcp/proxy/servers/leaky",
        "/v1/connectors",
        "/v1/scanner",
        "/v1/approvals",
        "/metrics",
      ]
    ) {
      const response = await fetch(`${gateway.url}${path}`, { headers: auth });
      bodies.push(`${path}: ${await response.text()}`);
      assert.ok(response.status < 500, `${path} answered ${response.status}`);
    }
    const reload = await fetch(`${gateway.url}/v1/mcp/reload`, {
      method: "POST",
      headers: { ...auth, "Content-Type": "application/json" },
      body: "{}",
    });
    bodies.push(await reload.text());

    const sinks: Record<string, string> = {
      "the operator and admin API": bodies.join("\n"),
      "the event bus": JSON.stringify(events),
      "the events stream": streamed,
      "the log": gateway.logs.join("\n"),
      "the SDK client": seenByClient.join("\n"),
    };
    assert.ok(sinks["the log"]!.includes("leaky: starting"), "the child's stderr was logged");
    assert.ok(sinks["the SDK client"]!.includes("authentication failed"), "the tool error arrived");
    for (const [sink, text] of Object.entries(sinks)) {
      for (const secret of secrets) {
        assert.ok(!text.includes(secret), `${secret} leaked through ${sink}`);
      }
    }
    const file = await Deno.readTextFile(fleet.path);
    for (const secret of secrets.filter((s) => !s.startsWith("interp"))) {
      assert.ok(file.includes(secret), `${secret} is in the fleet file`);
    }
  } finally {
    unsubscribe();
    await reader.cancel().catch(() => {});
    await pumping.catch(() => {});
    await gateway.stop();
    await fleet.remove();
    for (const id of ["web", "legacy", "leaky"]) {
      Deno.env.delete(`REDACTION_TEST_${id.toUpperCase()}`);
    }
  }
});
