import assert from "node:assert/strict";
import { connect, type Msg, type NatsConnection, StorageType } from "nats";
import { ManualClock, systemClock } from "../../core/support/clock.ts";
import { InProcessEventBus } from "../../core/bus/event_bus.ts";
import { type GatewayEvent, SUBJECT_PREFIX, subjectOf } from "../../core/bus/events.ts";
import { ApprovalTokens } from "../../core/governance/approval_tokens.ts";
import { createLogger, type Logger, silentLogger } from "../../core/support/logger.ts";
import type { PluginContext } from "../../core/plugin_api/mod.ts";
import { NEEDS_NATS, startNatsServer } from "../../tests/support/nats_server.ts";
import plugin from "./mod.ts";
import { DEFAULT_NONCE_BUCKET, NatsEventBus } from "./nats_event_bus.ts";

const POLL_MS = 10;
const DEADLINE_MS = 10_000;

/** Bounded polling wait for something a real server does; never a fixed sleep. */
async function waitFor(what: string, condition: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (Date.now() < deadline) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  throw new Error(`timed out after ${DEADLINE_MS} ms waiting for ${what}`);
}

function recorder(bus: NatsEventBus): GatewayEvent[] {
  const seen: GatewayEvent[] = [];
  bus.subscribe((event) => seen.push(event));
  return seen;
}

function memoryLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: createLogger({ level: "debug", sink: (line) => lines.push(line) }), lines };
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

function parse(msg: { data: Uint8Array }): Record<string, unknown> {
  return JSON.parse(decoder.decode(msg.data));
}

const STREAM = "AGENT33_EVENTS";

/**
 * Captures every gateway subject in a JetStream stream (file storage survives restart()), so
 * events flushed on reconnect are seen no matter which client reconnects first. A plain core
 * subscriber would race the bus's reconnect and could miss them (NATS core is at-most-once).
 */
async function captureAllSubjects(url: string): Promise<void> {
  const nc = await connect({ servers: url });
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({
      name: STREAM,
      subjects: [`${SUBJECT_PREFIX}.>`],
      storage: StorageType.File,
    });
  } finally {
    await nc.close();
  }
}

/** Polls the capture stream until it holds `count` messages, then returns them in order. */
async function captured(url: string, count: number): Promise<{ subject: string; body: unknown }[]> {
  const nc = await connect({ servers: url });
  try {
    const jsm = await nc.jetstreamManager();
    await waitFor(`${count} captured messages`, async () => {
      const info = await jsm.streams.info(STREAM);
      return info.state.messages >= count;
    });
    const out: { subject: string; body: unknown }[] = [];
    for (let seq = 1; seq <= count; seq++) {
      const stored = await jsm.streams.getMessage(STREAM, { seq });
      out.push({ subject: stored.subject, body: stored.json() });
    }
    return out;
  } finally {
    await nc.close();
  }
}

Deno.test(
  "an event published on one bus reaches a second bus and its exact subject",
  NEEDS_NATS,
  async () => {
    const server = await startNatsServer();
    const a = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
    const b = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
    const raw = await connect({ servers: server.url });
    try {
      const event: GatewayEvent = {
        type: "session.opened",
        sessionId: "s-1",
        transport: "stdio",
        tenant: "acme",
      };
      const onSubject: Msg[] = [];
      raw.subscribe(subjectOf(event), { callback: (_error, msg) => onSubject.push(msg) });
      await raw.flush();
      const seenByB = recorder(b);
      const seenByA = recorder(a);

      a.publish(event);

      assert.deepEqual(seenByA, [event], "local subscribers get the event synchronously");
      await waitFor(
        "replica B and the raw subscriber",
        () => seenByB.length === 1 && onSubject.length === 1,
      );
      assert.deepEqual(seenByB, [event], "remote event arrives without the origin tag");
      const msg = onSubject[0]!;
      assert.equal(msg.subject, "agent33.mcp.sessions.opened");
      assert.deepEqual(parse(msg), { ...event, origin: a.origin });
      assert.notEqual(a.origin, b.origin);
      assert.equal(a.stats().published, 1);
      assert.equal(b.stats().received, 1);
    } finally {
      await raw.close();
      await a.close();
      await b.close();
      await server.stop();
    }
  },
);

Deno.test(
  "a bus skips its own echo: local subscribers see each event once",
  NEEDS_NATS,
  async () => {
    const server = await startNatsServer();
    const a = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
    const b = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
    try {
      const seenByA = recorder(a);
      const seenByB = recorder(b);
      const first: GatewayEvent = { type: "tools.changed", count: 1 };
      const second: GatewayEvent = { type: "tools.changed", count: 2 };

      a.publish(first);
      await waitFor("B to receive the first event", () => seenByB.length === 1);
      // The server fanned `first` out to A before B could answer, and delivers in order per
      // connection: once A sees `second`, A's own echo of `first` has already been handled.
      b.publish(second);
      await waitFor("A to receive the second event", () => seenByA.length >= 2);

      assert.deepEqual(seenByA, [first, second]);
      assert.deepEqual(seenByB, [first, second]);
      assert.equal(a.stats().received, 1, "only B's event counts as received by A");
      assert.equal(a.stats().malformed, 0);
    } finally {
      await a.close();
      await b.close();
      await server.stop();
    }
  },
);

Deno.test(
  "publishing during an outage buffers without throwing; reconnect flushes",
  NEEDS_NATS,
  async () => {
    const server = await startNatsServer();
    await captureAllSubjects(server.url);
    const bus = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
    try {
      const local = recorder(bus);
      const events: GatewayEvent[] = [
        { type: "plugin.loaded", plugin: "p", kind: "bus", path: "/p" },
        { type: "tools.changed", count: 7 },
        { type: "gateway.stopping" },
      ];

      await server.restart(async () => {
        await waitFor("the bus to notice the outage", () => !bus.stats().connected);
        events.forEach((event, i) => {
          bus.publish(event);
          assert.equal(bus.stats().buffered, i + 1);
        });
        assert.deepEqual(local, events, "local subscribers are served during the outage");
      });

      await waitFor("the bus to reconnect and flush", () => {
        const stats = bus.stats();
        return stats.connected && stats.buffered === 0;
      });
      const got = await captured(server.url, events.length);
      assert.deepEqual(
        got,
        events.map((e) => ({ subject: subjectOf(e), body: { ...e, origin: bus.origin } })),
      );
      assert.deepEqual(
        bus.stats(),
        {
          published: 3,
          buffered: 0,
          dropped: 0,
          connected: true,
          reconnects: 1,
          received: 0,
          malformed: 0,
        },
      );
    } finally {
      await bus.close();
      await server.stop();
    }
  },
);

Deno.test("the outage buffer keeps the newest events and warns once", NEEDS_NATS, async () => {
  const server = await startNatsServer();
  await captureAllSubjects(server.url);
  const { logger, lines } = memoryLogger();
  const bus = await NatsEventBus.connect({ url: server.url, logger, bufferLimit: 3 });
  try {
    const events: GatewayEvent[] = [1, 2, 3, 4, 5].map((count) => ({
      type: "tools.changed",
      count,
    }));

    await server.restart(async () => {
      await waitFor("the bus to notice the outage", () => !bus.stats().connected);
      for (const event of events) bus.publish(event);
      assert.equal(bus.stats().buffered, 3);
      assert.equal(bus.stats().dropped, 2);
    });

    await waitFor("the bus to reconnect and flush", () => bus.stats().buffered === 0);
    const got = await captured(server.url, 3);
    assert.deepEqual(
      got.map((m) => m.body),
      events.slice(2).map((e) => ({ ...e, origin: bus.origin })),
    );
    assert.equal(bus.stats().dropped, 2);
    assert.equal(lines.filter((l) => l.includes("dropping oldest")).length, 1, lines.join("\n"));
  } finally {
    await bus.close();
    await server.stop();
  }
});

Deno.test("malformed messages on the wire are counted and dropped", NEEDS_NATS, async () => {
  const server = await startNatsServer();
  const bus = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
  const raw = await connect({ servers: server.url });
  try {
    const seen = recorder(bus);
    const bad = [
      "not json",
      "[1,2]",
      "null",
      "{}",
      '{"type":5}',
      '{"type":"no.such.event"}',
      '{"type":"tools.changed","count":1}', // a real type, on the wrong subject
      '{"type":"tools.changed","count":1,"origin":7}',
    ];
    for (const payload of bad) raw.publish(`${SUBJECT_PREFIX}.x`, encoder.encode(payload));
    // Same publisher, so the server delivers this after all the bad ones.
    const sentinel: GatewayEvent = { type: "tools.changed", count: 42 };
    raw.publish(subjectOf(sentinel), encoder.encode(JSON.stringify(sentinel)));

    await waitFor("the sentinel", () => seen.length > 0);
    assert.deepEqual(seen, [sentinel]);
    assert.equal(bus.stats().malformed, bad.length);
    assert.equal(bus.stats().received, 1);
  } finally {
    await raw.close();
    await bus.close();
    await server.stop();
  }
});

Deno.test(
  "a comma-separated NATS_URL lists the servers of one cluster: a node that is down is skipped",
  NEEDS_NATS,
  async () => {
    const server = await startNatsServer();
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const { port } = listener.addr as Deno.NetAddr;
    listener.close();
    try {
      for (
        const url of [
          `nats://127.0.0.1:${port}, ${server.url}`,
          `${server.url},nats://127.0.0.1:${port}`,
        ]
      ) {
        const bus = await NatsEventBus.connect({ url, logger: silentLogger });
        assert.equal(bus.stats().connected, true, url);
        await bus.close();
      }
    } finally {
      await server.stop();
    }
  },
);

Deno.test("the first connect fails fast with a clear message when no server listens", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  const url = `nats://127.0.0.1:${port}`;
  await assert.rejects(
    NatsEventBus.connect({ url, logger: silentLogger }),
    (error: Error) => {
      assert.match(error.message, new RegExp(`^Cannot connect to NATS at ${url}: `));
      assert.match(error.message, /start nats-server or unset NATS_URL to use the in-process bus$/);
      return true;
    },
  );
});

Deno.test(
  "close is idempotent and publish after close neither throws nor sends",
  NEEDS_NATS,
  async () => {
    const server = await startNatsServer();
    const bus = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
    try {
      const seen = recorder(bus);
      await Promise.all([bus.close(), bus.close()]);
      await bus.close();
      bus.publish({ type: "gateway.stopping" });
      assert.deepEqual(seen, []);
      assert.equal(bus.stats().connected, false);
      assert.equal(bus.stats().published, 0);
    } finally {
      await server.stop();
    }
  },
);

Deno.test(
  "close during an outage returns and counts the unsent events as dropped",
  NEEDS_NATS,
  async () => {
    const server = await startNatsServer();
    const bus = await NatsEventBus.connect({
      url: server.url,
      logger: silentLogger,
      reconnectTimeWait: 50,
    });
    try {
      await server.restart(async () => {
        await waitFor("the bus to notice the outage", () => !bus.stats().connected);
        bus.publish({ type: "gateway.stopping" });
        assert.equal(bus.stats().buffered, 1);
        await bus.close();
        assert.deepEqual(
          { buffered: bus.stats().buffered, dropped: bus.stats().dropped },
          { buffered: 0, dropped: 1 },
        );
      });
    } finally {
      await bus.close();
      await server.stop();
      // nats.js leaves its reconnect back-off timer running past close(); let it run out here rather
      // than in the next test (the ops sanitizer would rightly flag it).
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  },
);

function pluginContext(config: Record<string, unknown>): PluginContext {
  return {
    logger: silentLogger,
    clock: systemClock,
    env: {},
    config,
    bus: new InProcessEventBus(),
    tools: { register: () => () => {} },
  };
}

Deno.test("the bus-nats plugin needs NATS_URL and returns a working bus", NEEDS_NATS, async () => {
  assert.equal(plugin.kind, "bus");
  assert.equal(plugin.name, "bus-nats");
  assert.deepEqual(plugin.permissions, { net: true });
  await assert.rejects(
    Promise.resolve().then(() => plugin.create(pluginContext({}))),
    { message: "bus-nats needs NATS_URL" },
  );

  const server = await startNatsServer();
  let raw: NatsConnection | undefined;
  let bus: Awaited<ReturnType<typeof plugin.create>> | undefined;
  try {
    raw = await connect({ servers: server.url });
    const onWire: Msg[] = [];
    raw.subscribe(`${SUBJECT_PREFIX}.>`, { callback: (_error, msg) => onWire.push(msg) });
    await raw.flush();
    bus = await plugin.create(pluginContext({ url: server.url }));
    assert.ok(bus instanceof NatsEventBus);
    const event: GatewayEvent = { type: "gateway.started", transport: "stdio" };
    bus.publish(event);
    await waitFor("the event on the wire", () => onWire.length === 1);
    assert.equal(onWire[0]!.subject, "agent33.mcp.gateway.started");
  } finally {
    await bus?.close();
    await raw?.close();
    await server.stop();
  }
});

const NONCE_SECRET = "an-approval-secret-that-is-at-least-32-bytes-long";
const MINUTE_MS = 60_000;

function nonceOf(i: number): string {
  return i.toString(16).padStart(32, "0");
}

Deno.test(
  "two replicas share approval nonces: the first consume wins, the other gets false",
  NEEDS_NATS,
  async () => {
    const server = await startNatsServer();
    const a = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
    const b = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
    try {
      const clock = new ManualClock(Date.now());
      const storeA = await a.nonceStore({ clock });
      const storeB = await b.nonceStore({ clock });
      const expiresAt = clock.now() + MINUTE_MS;
      assert.equal(await storeA.consume(nonceOf(1), expiresAt), true);
      assert.equal(await storeB.consume(nonceOf(1), expiresAt), false, "replica B sees the use");
      assert.equal(await storeA.consume(nonceOf(1), expiresAt), false, "and so does A itself");
      assert.equal(await storeB.consume(nonceOf(2), expiresAt), true, "other nonces are free");

      // End to end: a token honoured by one replica is a replay on the other.
      const tokensA = new ApprovalTokens({ secret: NONCE_SECRET, clock, nonces: storeA });
      const tokensB = new ApprovalTokens({ secret: NONCE_SECRET, clock, nonces: storeB });
      const call = { tenant: "acme", tool: "fs__delete", argumentsHash: "f".repeat(64) };
      const { token } = await tokensA.issue({ ...call, requestId: "req-1" });
      const first = await tokensB.verify(token, call);
      assert.equal(first.ok ? first.requestId : first.code, "req-1");
      const again = await tokensA.verify(token, call);
      assert.equal(again.ok ? "ok" : again.code, "approval_replayed");

      const raw = await connect({ servers: server.url });
      try {
        const status = await (await raw.jetstream().views.kv(DEFAULT_NONCE_BUCKET)).status();
        assert.equal(status.history, 1);
        assert.equal(status.ttl, 11 * MINUTE_MS, "token lifetime plus the clock-skew allowance");
      } finally {
        await raw.close();
      }
    } finally {
      await a.close();
      await b.close();
      await server.stop();
    }
  },
);

Deno.test(
  "concurrent consumes of one nonce from two replicas: exactly one is true",
  NEEDS_NATS,
  async () => {
    const server = await startNatsServer();
    const a = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
    const b = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
    try {
      const [storeA, storeB] = await Promise.all([a.nonceStore(), b.nonceStore()]);
      const expiresAt = Date.now() + MINUTE_MS;
      const rounds = await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          Promise.all([
            storeA.consume(nonceOf(i), expiresAt),
            storeB.consume(nonceOf(i), expiresAt),
            storeA.consume(nonceOf(i), expiresAt),
            storeB.consume(nonceOf(i), expiresAt),
          ])),
      );
      for (const [i, results] of rounds.entries()) {
        assert.equal(results.filter(Boolean).length, 1, `nonce ${i}: ${results}`);
      }
    } finally {
      await a.close();
      await b.close();
      await server.stop();
    }
  },
);

Deno.test("the NATS nonce store fails closed on nonces it cannot guard", NEEDS_NATS, async () => {
  const server = await startNatsServer();
  const bus = await NatsEventBus.connect({ url: server.url, logger: silentLogger });
  try {
    const clock = new ManualClock(Date.now());
    const store = await bus.nonceStore({ clock, bucket: "test_nonces", ttlMs: MINUTE_MS });
    await assert.rejects(store.consume("not a key!", clock.now() + 1_000), TypeError);
    assert.equal(await store.consume(nonceOf(1), clock.now()), false, "already expired");
    await assert.rejects(
      store.consume(nonceOf(2), clock.now() + 3 * MINUTE_MS),
      { name: "RangeError", message: /outlives the 120000 ms the nonce bucket "test_nonces"/ },
    );
    await assert.rejects(
      bus.nonceStore({ bucket: "test_nonces", ttlMs: 10 * MINUTE_MS }),
      /forgets nonces after 120000 ms, but approval tokens need 660000 ms/,
    );
  } finally {
    await bus.close();
    await server.stop();
  }
  await assert.rejects(bus.nonceStore(), /bus is closed/);
});
