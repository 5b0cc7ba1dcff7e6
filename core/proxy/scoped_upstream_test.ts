import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { silentLogger } from "../support/logger.ts";
import { fleetServer, InMemoryUpstream } from "../../tests/support/in_memory_upstream.ts";
import { ChildServerHandle, type UpstreamCallContext } from "./child_server_handle.ts";
import type { FleetServer } from "./fleet_config.ts";
import { ScopedUpstream, sessionTag } from "./scoped_upstream.ts";

/** A pool over in-memory upstreams; `started` lists which server each instance was started with. */
function pool(overrides: Partial<FleetServer>) {
  const upstream = new InMemoryUpstream(["echo"]);
  const bus = new InProcessEventBus();
  const events: GatewayEvent[] = [];
  bus.subscribe((e) => events.push(e));
  const started: { instance: string | undefined; env: Record<string, string> }[] = [];
  const clock = new ManualClock(0);
  const server = fleetServer("mem", { scope: "tenant", maxInstances: 2, ...overrides });
  const scoped = new ScopedUpstream({
    server: server as FleetServer & { scope: "tenant" | "session" },
    createHandle: (of, instance) => {
      started.push({ instance, env: of.env });
      return new ChildServerHandle({
        server: of,
        createTransport: () => upstream.connect(),
        clock,
        logger: silentLogger,
        bus,
        ...(instance === undefined ? {} : { instance }),
      });
    },
    clock,
    logger: silentLogger,
  });
  return { scoped, started, clock, upstream, events };
}

const call = (ctx: Partial<UpstreamCallContext>) => ({
  signal: new AbortController().signal,
  ...ctx,
});

Deno.test("A tenant's first call starts its own instance, its credentials over the entry's; the template gives the catalog", async () => {
  const { scoped, started } = pool({
    env: { BASE: "b" },
    tenants: { acme: { env: { T: "a" }, headers: {} } },
  });
  await scoped.start();
  assert.deepEqual(scoped.catalog.tools.map((t) => t.name), ["echo"]);
  const result = await scoped.callTool("echo", { text: "hi" }, call({ tenant: "acme" }));
  assert.deepEqual(result.content, [{ type: "text", text: "echo:hi" }]);
  assert.deepEqual(started, [
    { instance: undefined, env: { BASE: "b" } },
    { instance: "acme", env: { BASE: "b", T: "a" } },
  ]);
  assert.deepEqual(scoped.snapshot().instances!.map((i) => [i.instance, i.state]), [[
    "acme",
    "READY",
  ]]);
  await scoped.stop();
});

Deno.test("At max_instances a tenant pool stops its least recently used idle instance", async () => {
  const { scoped } = pool({});
  await scoped.start();
  for (const tenant of ["a", "b", "a", "c"]) {
    await scoped.callTool("echo", { text: tenant }, call({ tenant }));
  }
  assert.deepEqual(scoped.snapshot().instances!.map((i) => i.instance), ["a", "c"]);
  await scoped.stop();
});

Deno.test("At max_instances a tenant pool stops an idle instance without subscriptions before a subscribed one", async () => {
  const { scoped } = pool({});
  await scoped.start();
  await scoped.subscribe("memo://readme", call({ tenant: "a", sessionId: "s1" }));
  await scoped.callTool("echo", { text: "b" }, call({ tenant: "b" }));
  await scoped.callTool("echo", { text: "c" }, call({ tenant: "c" }));
  assert.deepEqual(scoped.snapshot().instances!.map((i) => i.instance), ["a", "c"]);
  await scoped.stop();
});

Deno.test("A session pool refuses past max_instances and makes room when a session ends", async () => {
  const { scoped } = pool({ scope: "session", maxInstances: 1 });
  await scoped.start();
  await scoped.callTool("echo", { text: "x" }, call({ sessionId: "s1" }));
  await assert.rejects(
    scoped.callTool("echo", { text: "x" }, call({ sessionId: "s2" })),
    (e: Error & { code?: string }) => e.code === "rate_limited" && /max_instances/.test(e.message),
  );
  await scoped.endSession("s1");
  assert.deepEqual(scoped.snapshot().instances, []);
  await scoped.callTool("echo", { text: "x" }, call({ sessionId: "s2" }));
  await assert.rejects(
    scoped.callTool("echo", { text: "x" }, call({ tenant: "acme" })),
    (e: Error & { code?: string }) =>
      e.code === "not_allowed" && /comes from no session/.test(e.message),
  );
  await scoped.stop();
});

Deno.test("An instance with no call and no subscription stops after idle_timeout, and starts again on its next call", async () => {
  const { scoped, clock } = pool({ idleTimeoutMs: 60_000 });
  await scoped.start();
  await scoped.callTool("echo", { text: "x" }, call({ tenant: "acme" }));
  clock.advance(59_999);
  assert.deepEqual(scoped.snapshot().instances!.map((i) => i.instance), ["acme"]);
  // Each call starts the countdown again.
  await scoped.callTool("echo", { text: "x" }, call({ tenant: "acme" }));
  clock.advance(59_999);
  assert.deepEqual(scoped.snapshot().instances!.map((i) => i.instance), ["acme"]);
  clock.advance(1);
  assert.deepEqual(scoped.snapshot().instances, []);
  const result = await scoped.callTool("echo", { text: "again" }, call({ tenant: "acme" }));
  assert.deepEqual(result.content, [{ type: "text", text: "echo:again" }]);
  assert.deepEqual(scoped.snapshot().instances!.map((i) => i.state), ["READY"]);
  await scoped.stop();
});

Deno.test("A subscription keeps its instance past idle_timeout until it is unsubscribed", async () => {
  const { scoped, clock } = pool({ idleTimeoutMs: 60_000 });
  await scoped.start();
  await scoped.subscribe("memo://readme", call({ tenant: "acme" }));
  clock.advance(10 * 60_000);
  assert.deepEqual(scoped.snapshot().instances!.map((i) => i.instance), ["acme"]);
  await scoped.unsubscribe("memo://readme", call({ tenant: "acme" }));
  clock.advance(60_000);
  assert.deepEqual(scoped.snapshot().instances, []);
  await scoped.stop();
});

Deno.test("A subscription left open by a session that ended no longer keeps its tenant's instance", async () => {
  const { scoped, clock } = pool({ idleTimeoutMs: 60_000 });
  await scoped.start();
  await scoped.subscribe("memo://readme", call({ tenant: "acme", sessionId: "s1" }));
  await scoped.subscribe("memo://readme", call({ tenant: "acme", sessionId: "s2" }));
  await scoped.endSession("s1");
  clock.advance(60_000);
  assert.deepEqual(scoped.snapshot().instances!.map((i) => i.instance), ["acme"]);
  await scoped.endSession("s2");
  clock.advance(60_000);
  assert.deepEqual(scoped.snapshot().instances, []);
  await scoped.stop();
});

Deno.test("An instance's resource updates name its own tenant or session as their only audience", async () => {
  for (const scope of ["tenant", "session"] as const) {
    const { scoped, upstream } = pool({ scope });
    await scoped.start();
    const heard: unknown[] = [];
    scoped.onResourceUpdated((uri, audience) => heard.push([uri, audience]));
    const ctx = call(scope === "tenant" ? { tenant: "acme" } : { sessionId: "s1" });
    await scoped.subscribe("memo://readme", ctx);
    // servers[0] is the catalog template's connection, servers[1] the caller's instance.
    await upstream.servers[0]!.server.sendResourceUpdated({ uri: "memo://readme" });
    await upstream.servers[1]!.server.sendResourceUpdated({ uri: "memo://readme" });
    const audience = scope === "tenant" ? { tenant: "acme" } : { sessionId: "s1" };
    assert.deepEqual(heard, [["memo://readme", audience]]);
    await scoped.stop();
  }
});

Deno.test("A session's instance is named by a digest of its session id in status and events, never by the id", async () => {
  const { scoped, events } = pool({ scope: "session" });
  const sessionId = "a3f1c2d4-secret-session-id";
  await scoped.start();
  await scoped.callTool("echo", { text: "x" }, call({ sessionId }));
  const tag = sessionTag(sessionId);
  assert.match(tag, /^session-[0-9a-f]{12}$/);
  assert.deepEqual(scoped.snapshot().instances!.map((i) => i.instance), [tag]);
  const instanceEvents = events.filter((e) => "instance" in e);
  assert.ok(instanceEvents.some((e) => e.type === "proxy.state" && e.instance === tag));
  assert.ok(instanceEvents.every((e) => "instance" in e && e.instance === tag));
  assert.ok(!JSON.stringify(events).includes(sessionId));
  assert.ok(!JSON.stringify(scoped.snapshot()).includes(sessionId));
  await scoped.stop();
});

Deno.test("A tenant's instance names its tenant in its proxy events; the template's name none", async () => {
  const { scoped, events } = pool({});
  await scoped.start();
  const before = events.length;
  assert.ok(events.every((e) => !("instance" in e)));
  await scoped.callTool("echo", { text: "x" }, call({ tenant: "acme" }));
  const mine = events.slice(before).filter((e) => e.type.startsWith("proxy."));
  assert.ok(mine.length > 0);
  assert.ok(mine.every((e) => "instance" in e && e.instance === "acme"));
  await scoped.stop();
});
