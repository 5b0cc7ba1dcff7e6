import assert from "node:assert/strict";
import { ManualClock } from "../clock.ts";
import { InProcessEventBus } from "../event_bus.ts";
import { silentLogger } from "../logger.ts";
import { fleetServer, InMemoryUpstream } from "../../tests/support/in_memory_upstream.ts";
import { ChildServerHandle, type UpstreamCallContext } from "./child_server_handle.ts";
import type { FleetServer } from "./fleet_config.ts";
import { ScopedUpstream } from "./scoped_upstream.ts";

/** A pool over in-memory upstreams; `started` lists which server each instance was started with. */
function pool(overrides: Partial<FleetServer>) {
  const upstream = new InMemoryUpstream(["echo"]);
  const started: { instance: string | undefined; env: Record<string, string> }[] = [];
  const server = fleetServer("mem", { scope: "tenant", maxInstances: 2, ...overrides });
  const scoped = new ScopedUpstream({
    server: server as FleetServer & { scope: "tenant" | "session" },
    createHandle: (of, instance) => {
      started.push({ instance, env: of.env });
      return new ChildServerHandle({
        server: of,
        createTransport: () => upstream.connect(),
        clock: new ManualClock(0),
        logger: silentLogger,
        bus: new InProcessEventBus(),
        ...(instance === undefined ? {} : { instance }),
      });
    },
    logger: silentLogger,
  });
  return { scoped, started };
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
