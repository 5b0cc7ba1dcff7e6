import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { silentLogger } from "../support/logger.ts";
import { fleetServer, InMemoryUpstream, settle } from "../../tests/support/in_memory_upstream.ts";
import type { FleetServer } from "./fleet_config.ts";
import { ProxyManager } from "./proxy_manager.ts";

function setup(natives: string[] = ["system_status"]) {
  const upstreams = new Map<string, InMemoryUpstream>();
  const bus = new InProcessEventBus();
  const events: GatewayEvent[] = [];
  bus.subscribe((e) => events.push(e));
  const manager = new ProxyManager({
    createTransport: (server) => upstreams.get(server.id)!.connect(),
    isNativeTool: (name) => natives.includes(name),
    separator: "__",
    clock: new ManualClock(),
    logger: silentLogger,
    bus,
  });
  const add = (server: FleetServer, tools: string[]) => {
    upstreams.set(server.id, new InMemoryUpstream(tools));
    return server;
  };
  return { manager, add, upstreams, events };
}

const ctx = { signal: new AbortController().signal };

Deno.test("ProxyManager exposes each upstream's tools as <prefix>__<tool>", async () => {
  const { manager, add } = setup();
  await manager.start([
    add(fleetServer("github"), ["create_issue", "list_issues"]),
    add(fleetServer("memory"), ["read_graph"]),
  ]);
  assert.deepEqual(manager.aggregated.tools().map((t) => t.name), [
    "github__create_issue",
    "github__list_issues",
    "memory__read_graph",
  ]);
  const route = manager.aggregated.resolveTool("github__create_issue")!;
  assert.equal(route.handle.id, "github");
  assert.equal(route.original, "create_issue");
  await manager.stop();
});

Deno.test("ProxyManager never lets a proxied tool shadow a native tool, and says so", async () => {
  const { manager, add, events } = setup(["system_status"]);
  await manager.start([add(fleetServer("bare", { prefix: "" }), ["system_status", "other"])]);
  assert.deepEqual(manager.aggregated.tools().map((t) => t.name), ["other"]);
  assert.ok(
    events.some((e) =>
      e.type === "proxy.tool_dropped" && e.tool === "system_status" && /native/.test(e.reason)
    ),
  );
  await manager.stop();
});

Deno.test("ProxyManager applies a server's tools allow and deny globs", async () => {
  const { manager, add } = setup();
  await manager.start([
    add(fleetServer("fs", { tools: { allow: ["read_*", "list_*"], deny: ["read_secret"] } }), [
      "read_file",
      "read_secret",
      "list_dir",
      "write_file",
    ]),
  ]);
  assert.deepEqual(manager.aggregated.tools().map((t) => t.name), [
    "fs__read_file",
    "fs__list_dir",
  ]);
  assert.equal(manager.aggregated.resolveTool("fs__write_file"), undefined);
  await manager.stop();
});

Deno.test("ProxyManager skips disabled servers", async () => {
  const { manager, add } = setup();
  await manager.start([add(fleetServer("off", { enabled: false }), ["x"])]);
  assert.equal(manager.size, 0);
  assert.deepEqual(manager.aggregated.tools(), []);
});

Deno.test("ProxyManager namespaces resources reversibly as proxy://<id>/<uri> and prompts as <prefix>__<name>", async () => {
  const { manager, add } = setup();
  await manager.start([add(fleetServer("mem"), ["echo"])]);
  assert.deepEqual(manager.aggregated.resources().map((r) => r.uri), ["proxy://mem/memo://readme"]);
  const route = manager.aggregated.resolveResource("proxy://mem/memo://readme")!;
  assert.equal(route.original, "memo://readme");
  const read = await route.handle.readResource(route.original, ctx);
  assert.equal((read.contents[0] as { text: string }).text, "hello from upstream");
  assert.deepEqual(manager.aggregated.prompts().map((p) => p.name), ["mem__greet"]);
  assert.equal(manager.aggregated.resolvePrompt("mem__greet")?.original, "greet");
  await manager.stop();
});

Deno.test("ProxyManager hides an OPEN breaker's tools, tells listeners, and still routes calls to circuit_open", async () => {
  const { manager, add } = setup();
  await manager.start([add(fleetServer("a"), ["t"]), add(fleetServer("b"), ["u"])]);
  let changes = 0;
  manager.onChange(() => changes++);
  const handle = manager.get("a")!;
  for (let i = 0; i < 5; i++) handle.breaker.recordFailure();
  assert.equal(changes, 1);
  assert.deepEqual(manager.aggregated.tools().map((t) => t.name), ["b__u"]);
  const route = manager.aggregated.resolveTool("a__t")!;
  await assert.rejects(manager.callTool(route, {}, ctx), /circuit open/);
  await manager.stop();
});

Deno.test("ProxyManager tells listeners when an upstream adds a tool", async () => {
  const { manager, add, upstreams } = setup();
  await manager.start([add(fleetServer("mem"), ["echo"])]);
  const changed = Promise.withResolvers<void>();
  manager.onChange(() => changed.resolve());
  upstreams.get("mem")!.addTool("fresh");
  await changed.promise;
  assert.ok(manager.aggregated.tools().some((t) => t.name === "mem__fresh"));
  await manager.stop();
});

Deno.test("ProxyManager.scoped serves one upstream under its own names", async () => {
  const { manager, add } = setup();
  await manager.start([add(fleetServer("mem"), ["echo"]), add(fleetServer("other"), ["x"])]);
  const view = manager.scoped("mem")!;
  assert.deepEqual(view.tools().map((t) => t.name), ["echo"]);
  assert.deepEqual(view.resources().map((r) => r.uri), ["memo://readme"]);
  assert.equal(view.resolveTool("echo")?.handle.id, "mem");
  assert.equal(manager.scoped("nope"), undefined);
  await manager.stop();
});

Deno.test("ProxyManager.reload adds, removes and restarts changed servers", async () => {
  const { manager, add } = setup();
  await manager.start([add(fleetServer("a"), ["t"]), add(fleetServer("b"), ["u"])]);
  const result = await manager.reload([
    fleetServer("a", { timeouts: { connectMs: 1_000, callMs: 1_000 } }),
    add(fleetServer("c"), ["v"]),
  ]);
  assert.deepEqual(result, { added: ["c"], removed: ["b"], changed: ["a"] });
  await settle();
  assert.deepEqual(manager.aggregated.tools().map((t) => t.name), ["a__t", "c__v"]);
  await manager.stop();
});

Deno.test("settled() waits for upstreams still on their first start, so a first list sees their tools", async () => {
  const { manager, add } = setup();
  const starting = manager.start([add(fleetServer("memory"), ["read_graph"])]);
  assert.equal(manager.get("memory")!.state, "STARTING");
  assert.deepEqual(manager.aggregated.tools(), []);
  await manager.settled(10_000);
  assert.deepEqual(manager.aggregated.tools().map((t) => t.name), ["memory__read_graph"]);
  await starting;
  await manager.stop();
});

Deno.test("settled() gives up after its bound while an upstream is still STARTING", async () => {
  const { manager, add, upstreams } = setup();
  const clock = new ManualClock();
  const bounded = new ProxyManager({
    createTransport: (server) => upstreams.get(server.id)!.connect(),
    isNativeTool: () => false,
    separator: "__",
    clock,
    logger: silentLogger,
    bus: new InProcessEventBus(),
  });
  const server = add(fleetServer("slow"), ["echo"]);
  upstreams.get("slow")!.hung = true;
  const starting = bounded.start([server]);
  let done = false;
  const waiting = bounded.settled(5_000).then(() => void (done = true));
  clock.advance(4_999);
  await settle();
  assert.equal(done, false, "still waiting inside the bound");
  clock.advance(1);
  await waiting;
  assert.equal(bounded.get("slow")!.state, "STARTING");
  await bounded.stop();
  await starting;
  await manager.stop();
});

Deno.test("settled() does not wait for a server restarting after it was READY once", async () => {
  const { manager, add, upstreams } = setup();
  await manager.start([add(fleetServer("flaky"), ["echo"])]);
  const handle = manager.get("flaky")!;
  upstreams.get("flaky")!.hung = true;
  const restarting = handle.restart();
  while (handle.state !== "STARTING") await settle();
  await manager.settled(60_000);
  assert.equal(handle.state, "STARTING", "answered without waiting for the restart");
  await upstreams.get("flaky")!.crash(); // ends the pending handshake at once
  await restarting;
  await manager.stop();
});

Deno.test("ProxyManager reports a dropped tool once while it stays dropped and forgets it once it is not", async () => {
  const { manager, add, events } = setup();
  await manager.start([
    add(fleetServer("a", { prefix: "" }), ["x"]),
    add(fleetServer("b", { prefix: "" }), ["x"]),
  ]);
  const reports = () => events.filter((e) => e.type === "proxy.tool_dropped").length;
  manager.aggregated.tools();
  manager.refresh();
  manager.aggregated.tools();
  assert.equal(reports(), 1);
  // No longer dropped: its report is forgotten (the set is bounded by what the catalogs list).
  await manager.get("a")!.stop();
  manager.aggregated.tools();
  await manager.get("a")!.start();
  manager.aggregated.tools();
  assert.equal(reports(), 2);
  await manager.stop();
});
