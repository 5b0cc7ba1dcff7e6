/**
 * The scanner inside the gateway: poisoned upstream tools are quarantined (hidden, calls refused)
 * until an operator releases them, and a changed definition of a pinned tool is quarantined too.
 */
import assert from "node:assert/strict";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import type { GatewayEvent } from "../../core/events.ts";
import { eventually, fixture, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway } from "../support/gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

const fleetWith = (variant: string) => `
proxy_servers:
  - id: poisoned
    command: ["deno", "run", "--config", "${DENO_JSON}", "${fixture("poisoned_server.ts")}"]
    sandbox: deno
    env:
      POISONED_VARIANT: ${variant}
    permissions:
      env: [POISONED_VARIANT]
      read: true
`;

Deno.test("The gateway quarantines poisoned upstream tools until an operator releases them, and a changed pinned tool", async () => {
  const fleet = await writeFleet(fleetWith("original"));
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_SCANNER_BLOCK: "high",
    MCP_POLICY_PATH: "/nonexistent/policies",
  });
  const events: GatewayEvent[] = [];
  gateway.kernel.bus.subscribe((e) => events.push(e));
  const client = await connectHttp(gateway);
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${gateway.url}${path}`, {
      ...init,
      headers: { Authorization: `Bearer ${gateway.token}`, "Content-Type": "application/json" },
    });
  try {
    await gateway.kernel.fleetStarted;
    await eventually(
      () => (gateway.kernel.scanner?.quarantinedTools("poisoned").length ?? 0) >= 4,
      "the scan",
    );
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("poisoned__get_fact"), "a clean tool serves");
    for (const bad of ["add", "lookup", "sync_notes", "helper"]) {
      assert.ok(!names.includes(`poisoned__${bad}`), `${bad} is hidden`);
    }
    await assert.rejects(
      client.callTool({ name: "poisoned__add", arguments: { a: 1, b: 2 } }),
      (e: McpError) =>
        (e.data as { code: string }).code === "quarantined" &&
        /scanner finding/.test(e.message),
    );

    const status = await (await api("/v1/operator/status")).json();
    const server = status.servers.find((s: { id: string }) => s.id === "poisoned");
    assert.ok(server.findings.some((f: { severity: string }) => f.severity === "high"));
    assert.ok(server.quarantined.some((q: { tool: string }) => q.tool === "add"));

    const released = await api("/v1/scanner/release", {
      method: "POST",
      body: JSON.stringify({ server: "poisoned", tool: "add" }),
    });
    assert.equal(released.status, 200);
    await released.body?.cancel();
    assert.ok((await client.listTools()).tools.some((t) => t.name === "poisoned__add"));
    const ok = await client.callTool({ name: "poisoned__add", arguments: { a: 1, b: 2 } });
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);

    // The rug pull: the same server comes back with a changed get_fact.
    await Deno.writeTextFile(fleet.path, fleetWith("changed"));
    await eventually(
      () =>
        events.some((e) =>
          e.type === "scanner.quarantined" && e.tool === "get_fact" &&
          /definition changed/.test(e.reason)
        ),
      "the rug pull quarantine",
    );
    await assert.rejects(
      client.callTool({ name: "poisoned__get_fact", arguments: { topic: "x" } }),
      (e: McpError) => (e.data as { code: string }).code === "quarantined",
    );
  } finally {
    await client.close();
    await gateway.stop();
    await fleet.remove();
  }
});

Deno.test("Below the blocking severity, a flagged upstream tool is governed as destructive: its calls need approval", async () => {
  const fleet = await writeFleet(fleetWith("original"));
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_SCANNER_BLOCK: "critical",
    MCP_SCANNER_APPROVAL: "high",
    MCP_POLICY_PATH: "/nonexistent/policies",
  });
  const client = await connectHttp(gateway);
  try {
    await gateway.kernel.fleetStarted;
    await eventually(
      () => (gateway.kernel.scanner?.findingsFor("poisoned").length ?? 0) > 0,
      "the scan",
    );
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("poisoned__lookup"), "flagged but below the block: still listed");
    await assert.rejects(
      client.callTool({ name: "poisoned__lookup", arguments: { word: "x" } }),
      (e: McpError) => (e.data as { code: string; effect?: string }).code === "approval_required",
    );
    const clean = await client.callTool({ name: "poisoned__get_fact", arguments: { topic: "x" } });
    assert.deepEqual(clean.content, [{ type: "text", text: "ok" }]);
  } finally {
    await client.close();
    await gateway.stop();
    await fleet.remove();
  }
});
