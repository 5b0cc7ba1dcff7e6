/**
 * Upstreams that misbehave, as real processes: the gateway stays up, every call gets an answer or a
 * clear error naming the server within its timeout, and the other servers keep serving.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import type { GatewayEvent } from "../../core/bus/events.ts";
import { eventually, faultServer, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway, withFleet } from "../support/gateway.ts";

/** {@link withFleet} of the `proxy_servers:` entries `servers`. */
const withFaults = (
  servers: string,
  fn: (gateway: TestGateway, client: Client, events: GatewayEvent[]) => Promise<void>,
) => withFleet(`proxy_servers:${servers}`, fn);

const rejectsNaming = (server: string, pattern: RegExp) => (e: McpError) =>
  e.message.includes(`"${server}"`) && pattern.test(e.message);

Deno.test("An upstream that exits at start is FAILED with its reason; the others serve", async () => {
  await withFaults(
    faultServer("dead", { fault: "exit-at-start" }) + faultServer("good"),
    async (gateway, client) => {
      const dead = gateway.kernel.proxy.get("dead")!.snapshot();
      assert.equal(dead.state, "FAILED");
      assert.match(dead.lastError ?? "", /start failed/);
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes("good__ok"));
      assert.ok(!names.some((n) => n.startsWith("dead__")), "a FAILED server's tools are hidden");
      await assert.rejects(
        client.callTool({ name: "dead__ok", arguments: {} }),
        rejectsNaming("dead", /FAILED/),
      );
      const ok = await client.callTool({ name: "good__ok", arguments: {} });
      assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
    },
  );
});

Deno.test("An upstream that exits mid-call fails that call with an error naming it, then restarts", async () => {
  const restartFast = "    breaker: { threshold: 5, base: 0.2, max: 1 }\n";
  await withFaults(
    faultServer("flaky", { extra: restartFast }),
    async (gateway, client, events) => {
      await assert.rejects(
        client.callTool({ name: "flaky__crash", arguments: {} }),
        rejectsNaming("flaky", /closed the connection/),
      );
      assert.ok(
        events.some((e) => e.type === "proxy.state" && e.server === "flaky" && e.to === "FAILED"),
      );
      await eventually(() => gateway.kernel.proxy.get("flaky")!.state === "READY", "the restart");
      const ok = await client.callTool({ name: "flaky__ok", arguments: {} });
      assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
    },
  );
});

Deno.test("A call to an upstream that hangs times out with an error naming the server", async () => {
  const shortCall = "    timeouts: { connect: 30, call: 0.5 }\n";
  await withFaults(faultServer("stuck", { extra: shortCall }), async (_gateway, client) => {
    await assert.rejects(
      client.callTool({ name: "stuck__hang", arguments: {} }),
      rejectsNaming("stuck", /did not answer tools\/call "hang" within 500 ms/),
    );
    const ok = await client.callTool({ name: "stuck__ok", arguments: {} });
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
  });
});

Deno.test("A slow upstream answers within its call timeout", async () => {
  await withFaults(faultServer("slow"), async (_gateway, client) => {
    const result = await client.callTool({ name: "slow__slow", arguments: { ms: 300 } });
    assert.deepEqual(result.content, [{ type: "text", text: "slept 300" }]);
  });
});

Deno.test("Garbage on an upstream's stdout is dropped and the call still answers", async () => {
  await withFaults(faultServer("noisy"), async (gateway, client) => {
    const result = await client.callTool({ name: "noisy__garbage", arguments: {} });
    assert.deepEqual(result.content, [{ type: "text", text: "after garbage" }]);
    assert.equal(gateway.kernel.proxy.get("noisy")!.state, "READY");
  });
});

Deno.test("An oversized upstream answer is refused and its call answered at once with an error naming the server", async () => {
  const shortCall = "    timeouts: { connect: 30, call: 30 }\n";
  const fleet = faultServer("big", { extra: shortCall });
  const file = await writeFleet(`proxy_servers:${fleet}`);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: file.path,
    MCP_MAX_MESSAGE_BYTES: String(1 << 20),
  });
  try {
    await gateway.kernel.fleetStarted;
    const client = await connectHttp(gateway);
    try {
      // Answered at once from the dropped frame's id, not after the call timeout.
      await assert.rejects(
        client.callTool({ name: "big__huge", arguments: { bytes: 2 << 20 } }),
        rejectsNaming("big", /could not relay \(frame of \d+ bytes exceeds the limit of 1048576/),
      );
      const small = await client.callTool({ name: "big__huge", arguments: { bytes: 10 } });
      assert.deepEqual(small.content, [{ type: "text", text: "x".repeat(10) }]);
    } finally {
      await client.close();
    }
  } finally {
    await gateway.stop();
    await file.remove();
  }
});

Deno.test("Tools with an invalid name or schema are dropped with an event; the server's valid tools stay", async () => {
  await withFaults(faultServer("odd", { fault: "bad-tools" }), async (gateway, client) => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(names.filter((n) => n.startsWith("odd__")), ["odd__ok"]);
    const logs = gateway.logs.join("\n");
    assert.match(logs, /dropped tool "bad name with spaces"/);
    assert.match(logs, /dropped tool "bad_schema"/);
  });
});

Deno.test("Two servers with the same id stop the gateway from starting, naming both lines", async () => {
  const fleet = await writeFleet(
    `proxy_servers:${faultServer("twin")}${faultServer("twin")}`,
  );
  try {
    await assert.rejects(
      startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path }),
      (e: Error) =>
        /twin/.test(e.message) && /line/.test(e.message) && /fleet\.yaml:\d+/.test(e.message),
    );
  } finally {
    await fleet.remove();
  }
});

Deno.test("A fleet file edited into invalid YAML keeps the running fleet and reports why; a valid edit applies", async () => {
  const fleet = await writeFleet(`proxy_servers:${faultServer("one")}`);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  const events: GatewayEvent[] = [];
  gateway.kernel.bus.subscribe((e) => events.push(e));
  try {
    await gateway.kernel.fleetStarted;
    await Deno.writeTextFile(fleet.path, "proxy_servers:\n  - id: [unclosed\n");
    await eventually(
      () => events.some((e) => e.type === "fleet.reload_failed"),
      "the reload failure",
    );
    const failure = events.find((e) => e.type === "fleet.reload_failed") as { reason: string };
    assert.match(failure.reason, /fleet\.yaml:\d+/);
    assert.equal(gateway.kernel.proxy.get("one")?.state, "READY", "the running fleet stays");

    await Deno.writeTextFile(
      fleet.path,
      `proxy_servers:${faultServer("one")}${faultServer("two")}`,
    );
    await eventually(() => events.some((e) => e.type === "fleet.reloaded"), "the reload");
    await eventually(() => gateway.kernel.proxy.get("two")?.state === "READY", "the new server");
    assert.equal(gateway.kernel.proxy.get("one")?.state, "READY");
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
});

Deno.test("Stopping the gateway leaves no upstream child process behind", async () => {
  const fleet = await writeFleet(`proxy_servers:${faultServer("p")}`);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  try {
    await gateway.kernel.fleetStarted;
    const logs = gateway.logs.join("\n");
    const pid = Number(/upstream started server=p pid=(\d+)/.exec(logs)?.[1]);
    assert.ok(pid > 0, "the child's pid is logged");
    assert.ok(alive(pid));
    await gateway.stop();
    await eventually(() => !alive(pid), "the child to exit", 10_000);
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
});

/** Whether a process exists and is not a zombie (Linux /proc). */
function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

Deno.test("isolation: inline meets the same faults like a worker: crash mid-call, hang, garbage, and a restart", async () => {
  const inline = "    isolation: inline\n    timeouts: { connect: 30, call: 0.5 }\n" +
    "    breaker: { threshold: 5, base: 0.2, max: 1 }\n";
  await withFaults(faultServer("near", { extra: inline }), async (gateway, client, events) => {
    const garbage = await client.callTool({ name: "near__garbage", arguments: {} });
    assert.deepEqual(garbage.content, [{ type: "text", text: "after garbage" }]);
    await assert.rejects(
      client.callTool({ name: "near__hang", arguments: {} }),
      rejectsNaming("near", /did not answer tools\/call "hang" within 500 ms/),
    );
    await assert.rejects(
      client.callTool({ name: "near__crash", arguments: {} }),
      rejectsNaming("near", /closed the connection/),
    );
    assert.ok(
      events.some((e) => e.type === "proxy.state" && e.server === "near" && e.to === "FAILED"),
    );
    await eventually(() => gateway.kernel.proxy.get("near")!.state === "READY", "the restart");
    const ok = await client.callTool({ name: "near__ok", arguments: {} });
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
  });
});
