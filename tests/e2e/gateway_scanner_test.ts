/**
 * The scanner inside the gateway: poisoned upstream tools are quarantined (hidden, calls refused)
 * until an operator releases them, and a changed definition of a pinned tool is quarantined too.
 */
import assert from "node:assert/strict";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import type { GatewayEvent } from "../../core/bus/events.ts";
import {
  eventually,
  everythingServer,
  fixture,
  memoryServer,
  writeFleet,
} from "../support/fleet.ts";
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

const poisonedWith = (env: Record<string, string>) => `
  - id: poisoned
    command: ["deno", "run", "--config", "${DENO_JSON}", "${fixture("poisoned_server.ts")}"]
    sandbox: deno
    env: ${JSON.stringify({ POISONED_VARIANT: "original", ...env })}
    permissions:
      env: ${JSON.stringify(["POISONED_VARIANT", ...Object.keys(env)])}
      read: true
`;

Deno.test("With default settings, poisoned upstream tools are quarantined and a real reference server's tools all serve", async () => {
  const data = await Deno.makeTempDir();
  const fleet = await writeFleet(
    `proxy_servers:${poisonedWith({ POISONED_CLASSES: "on" })}${everythingServer()}${
      memoryServer(data)
    }`,
  );
  // No scanner setting: MCP_SCANNER_BLOCK and MCP_SCANNER_APPROVAL keep their defaults.
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  const client = await connectHttp(gateway);
  try {
    await gateway.kernel.fleetStarted;
    await eventually(
      () => (gateway.kernel.scanner?.quarantinedTools("poisoned").length ?? 0) >= 6,
      "the scan of the poisoned upstream",
    );
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const bad of ["add", "lookup", "sync_notes", "helper", "secure_fetch", "forecast"]) {
      assert.ok(!names.includes(`poisoned__${bad}`), `${bad} is quarantined by default`);
    }
    await assert.rejects(
      client.callTool({ name: "poisoned__secure_fetch", arguments: { url: "https://x.test" } }),
      (e: McpError) =>
        (e.data as { code: string }).code === "quarantined" && /tool-preference/.test(e.message),
    );
    assert.ok(names.includes("poisoned__get_fact"), "the clean tool of the same server serves");
    const reference = [
      ...(gateway.kernel.proxy.get("everything")?.catalog.tools ?? []),
      ...(gateway.kernel.proxy.get("memory")?.catalog.tools ?? []),
    ];
    assert.ok(reference.length >= 20, "the reference servers listed their tools");
    assert.deepEqual(gateway.kernel.scanner?.quarantinedTools("everything"), []);
    assert.deepEqual(gateway.kernel.scanner?.quarantinedTools("memory"), []);
    for (const id of ["everything", "memory"]) {
      const flagged: { severity: string }[] = (gateway.kernel.scanner?.findingsFor(id) ?? [])
        .filter((f) => f.severity === "medium" || f.severity === "high");
      assert.deepEqual(flagged, [], `${id}: nothing needs approval or quarantine`);
    }
    // (The shipped policy denies everything__get-env by name; that is governance, not the scanner.)
    for (const t of gateway.kernel.proxy.get("memory")!.catalog.tools) {
      assert.ok(names.includes(`memory__${t.name}`), `memory__${t.name} is listed`);
    }
    const echo = await client.callTool({ name: "everything__echo", arguments: { message: "hi" } });
    assert.match(JSON.stringify(echo.content), /hi/);
  } finally {
    await client.close();
    await gateway.stop();
    await fleet.remove();
    await Deno.remove(data, { recursive: true });
  }
});

Deno.test("A catalog too big to scan in the event loop is scanned in the worker: its poisoned tools are held, then quarantined, the clean ones released", async () => {
  const fleet = await writeFleet(`proxy_servers:${poisonedWith({ POISONED_BULK_KB: "400" })}`);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  const client = await connectHttp(gateway);
  try {
    await gateway.kernel.fleetStarted;
    const catalog = gateway.kernel.proxy.get("poisoned")!.catalog.tools;
    assert.ok(JSON.stringify(catalog).length > 256 * 1024, "the catalog is over the worker bound");
    await eventually(async () => {
      const names = (await client.listTools()).tools.map((t) => t.name);
      return names.includes("poisoned__get_fact") && names.includes("poisoned__catalog_entry_0");
    }, "the worker's scan");
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const bad of ["add", "lookup", "sync_notes", "helper"]) {
      assert.ok(!names.includes(`poisoned__${bad}`), `${bad} is quarantined`);
    }
    assert.equal(names.filter((n) => n.startsWith("poisoned__catalog_entry_")).length, 100);
  } finally {
    await client.close();
    await gateway.stop();
    await fleet.remove();
  }
});

Deno.test("With a model configured for a second opinion, a descriptor the offline rules pass is judged by it in the background and its verdict applies", async () => {
  const dir = await Deno.makeTempDir();
  const script = `${dir}/verdict.json`;
  await Deno.writeTextFile(
    script,
    JSON.stringify([{ text: '{"verdict":"malicious","reason":"scripted reviewer says so"}' }]),
  );
  const fleet = await writeFleet(`proxy_servers:${poisonedWith({})}`);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_PLUGIN_MODEL_SCRIPTED_SCRIPT: script,
    MCP_PLUGIN_SCANNER_MODEL_PROVIDER: "scripted",
    MCP_PLUGIN_SCANNER_MODEL_SEVERITY: "high",
  });
  const client = await connectHttp(gateway);
  try {
    await gateway.kernel.fleetStarted;
    await eventually(
      () =>
        gateway.kernel.scanner?.quarantinedTools("poisoned").some((q) =>
          q.tool === "get_fact" && /model-opinion/.test(q.reason)
        ) ?? false,
      "the model's verdict on get_fact",
    );
    await assert.rejects(
      client.callTool({ name: "poisoned__get_fact", arguments: { topic: "x" } }),
      (e: McpError) =>
        (e.data as { code: string }).code === "quarantined" &&
        /scripted reviewer says so/.test(e.message),
    );
  } finally {
    await client.close();
    await gateway.stop();
    await fleet.remove();
    await Deno.remove(dir, { recursive: true });
  }
});
