import assert from "node:assert/strict";
import { InProcessEventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { ManualClock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import { silentLogger } from "../support/logger.ts";
import { fleetServer, InMemoryUpstream } from "../../tests/support/in_memory_upstream.ts";
import type { FleetServer } from "./fleet_config.ts";
import { FleetReloader, type FleetSource } from "./fleet_reloader.ts";
import { ProxyManager } from "./proxy_manager.ts";

/** A reloader over a real ProxyManager whose upstreams are in-memory MCP servers. */
function setup() {
  const upstreams = new Map<string, InMemoryUpstream>();
  const bus = new InProcessEventBus();
  const events: GatewayEvent[] = [];
  bus.subscribe((e) => void events.push(e));
  const proxy = new ProxyManager({
    createTransport: (server) => upstreams.get(server.id)!.connect(),
    isNativeTool: () => false,
    separator: "__",
    clock: new ManualClock(),
    logger: silentLogger,
    bus,
  });
  let stopping = false;
  const reloader = new FleetReloader({
    path: undefined,
    proxy,
    upstreams: { plan: () => ({}) as ReturnType<FleetReloaderPlan> },
    env: () => ({}),
    dataDir: "/tmp",
    separator: "__",
    healthIntervalSeconds: 30,
    logger: silentLogger,
    bus,
    stopping: () => stopping,
  });
  const server = (id: string, tools: string[]): FleetServer => {
    upstreams.set(id, new InMemoryUpstream(tools));
    return fleetServer(id);
  };
  const source = (path: string, servers: () => FleetServer[]): FleetSource => ({
    path,
    read: () => Promise.resolve({ path, servers: servers() }),
  });
  return { proxy, reloader, events, server, source, stop: () => stopping = true };
}

/** What the reloader asks of the upstream transports: only whether a server can be planned. */
type FleetReloaderPlan = ConstructorParameters<typeof FleetReloader>[0]["upstreams"]["plan"];

Deno.test("reload(source) applies the fleet the source reads and publishes fleet.reloaded naming it", async () => {
  const s = setup();
  try {
    const diff = await s.reloader.reload(s.source("kv:fleet@1", () => [s.server("a", ["t"])]));
    assert.deepEqual(diff.added, ["a"]);
    assert.deepEqual(s.reloader.fleet.map((f) => f.id), ["a"]);
    const reloaded = s.events.find((e) => e.type === "fleet.reloaded");
    assert.deepEqual(reloaded, {
      type: "fleet.reloaded",
      path: "kv:fleet@1",
      added: ["a"],
      removed: [],
      changed: [],
    });
  } finally {
    await s.proxy.stop();
  }
});

Deno.test("a watched reload of the fleet in force publishes no fleet.reloaded (the gateway's own write seen)", async () => {
  const s = setup();
  try {
    const fleet = [s.server("a", ["t"])];
    await s.reloader.reload(s.source("fleet.yaml", () => fleet));
    const diff = await s.reloader.reload(
      s.source("fleet.yaml", () => structuredClone(fleet)),
      { quietIfSame: true },
    );
    assert.deepEqual(diff, { added: [], removed: [], changed: [] });
    assert.equal(s.events.filter((e) => e.type === "fleet.reloaded").length, 1);
  } finally {
    await s.proxy.stop();
  }
});

Deno.test("after a refused file, the fleet in force read again publishes fleet.reloaded", async () => {
  const s = setup();
  try {
    const fleet = [s.server("a", ["t"])];
    await s.reloader.reload(s.source("fleet.yaml", () => fleet));
    const broken: FleetSource = {
      path: "fleet.yaml",
      read: () => Promise.reject(new Error("bad")),
    };
    await assert.rejects(() => s.reloader.reload(broken), /bad/);
    await s.reloader.reload(s.source("fleet.yaml", () => fleet));
    assert.equal(s.events.filter((e) => e.type === "fleet.reloaded").length, 2);
  } finally {
    await s.proxy.stop();
  }
});

Deno.test("a reload that only adds a disabled entry publishes fleet.reloaded, though no server starts", async () => {
  const s = setup();
  try {
    const fleet = [s.server("a", ["t"])];
    await s.reloader.reload(s.source("fleet.yaml", () => fleet));
    const off = { ...s.server("b", ["t"]), enabled: false };
    const diff = await s.reloader.reload(s.source("fleet.yaml", () => [...fleet, off]), {
      quietIfSame: true,
    });
    assert.deepEqual(diff, { added: [], removed: [], changed: [] });
    assert.equal(s.events.filter((e) => e.type === "fleet.reloaded").length, 2);
  } finally {
    await s.proxy.stop();
  }
});

Deno.test("a source that cannot be read keeps the running fleet, publishes fleet.reload_failed and rejects", async () => {
  const s = setup();
  try {
    await s.reloader.apply([s.server("a", ["t"])]);
    const broken: FleetSource = {
      path: "kv:fleet@2",
      read: () => Promise.reject(new GatewayError("config_invalid", "fleet@2: line 3: bad")),
    };
    await assert.rejects(s.reloader.reload(broken), /line 3: bad/);
    assert.deepEqual(s.reloader.fleet.map((f) => f.id), ["a"], "the running fleet stays");
    const failed = s.events.find((e) => e.type === "fleet.reload_failed");
    assert.deepEqual(failed, {
      type: "fleet.reload_failed",
      path: "kv:fleet@2",
      reason: "fleet@2: line 3: bad",
    });
  } finally {
    await s.proxy.stop();
  }
});

Deno.test("reload without a source or a fleet file refuses with config_invalid naming MCP_PROXY_CONFIG_PATH", async () => {
  const s = setup();
  await assert.rejects(s.reloader.reload(), /MCP_PROXY_CONFIG_PATH/);
});

Deno.test("applications run one at a time: a source is read only after the application before it", async () => {
  const s = setup();
  try {
    const order: string[] = [];
    const first = s.reloader.apply([s.server("a", ["t"])]).then(() => order.push("applied a"));
    const second = s.reloader.reload(s.source("kv:fleet@3", () => {
      order.push(`read after ${s.reloader.fleet.map((f) => f.id).join(",") || "nothing"}`);
      return [s.server("b", ["t"])];
    }));
    await Promise.all([first, second]);
    assert.deepEqual(order, ["applied a", "read after a"]);
    assert.deepEqual(s.reloader.fleet.map((f) => f.id), ["b"]);
  } finally {
    await s.proxy.stop();
  }
});

Deno.test("once the gateway stops, no fleet is applied (no upstream starts that the stop would miss)", async () => {
  const s = setup();
  s.stop();
  const diff = await s.reloader.apply([s.server("a", ["t"])]);
  assert.deepEqual(diff, { added: [], removed: [], changed: [] });
  assert.equal(s.proxy.handles().length, 0);
});
