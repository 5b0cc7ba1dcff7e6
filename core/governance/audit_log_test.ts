import assert from "node:assert/strict";
import { join } from "node:path";
import { ManualClock } from "../support/clock.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import { type GatewayEvent, subjectOf } from "../bus/events.ts";
import { createLogger, silentLogger } from "../support/logger.ts";
import { type AuditEntry, AuditLog, type AuditLogOptions } from "./audit_log.ts";

const HASH = "e".repeat(64);

function entry(n: number, extra: Partial<AuditEntry> = {}): AuditEntry {
  return {
    time: new Date(1_700_000_000_000 + n).toISOString(),
    tenant: "acme",
    subject: "alice",
    tool: `tool_${n}`,
    effect: "write",
    verdict: "allow",
    rule: 'policies/acme.yaml:3 allow "*"',
    argumentsHash: HASH,
    arguments: { n, password: "hunter2" },
    ...extra,
  };
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "agent33-audit-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function setup(options: Partial<AuditLogOptions> = {}) {
  const bus = new InProcessEventBus();
  const events: GatewayEvent[] = [];
  bus.subscribe((event) => events.push(event));
  const lines: string[] = [];
  const logger = createLogger({ level: "debug", sink: (line) => lines.push(line) });
  const clock = new ManualClock(1_700_000_000_000);
  const log = new AuditLog({ bus, clock, logger, ...options });
  return { log, events, lines, clock };
}

async function readLines(path: string): Promise<Record<string, unknown>[]> {
  const text = await Deno.readTextFile(path);
  return text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
}

Deno.test("each decision is one JSON line, in order, without raw arguments by default", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "audit.jsonl");
    const { log } = setup({ path });
    try {
      for (let n = 0; n < 3; n++) log.record(entry(n));
      await log.flush();
      const { arguments: _args, ...expected } = entry(0);
      const lines = await readLines(path);
      assert.deepEqual(lines[0], expected);
      assert.deepEqual(lines.map((l) => l.tool), ["tool_0", "tool_1", "tool_2"]);
      assert.ok(!(await Deno.readTextFile(path)).includes("hunter2"));
      assert.equal(log.stats().written, 3);
    } finally {
      await log.close();
    }
  });
});

Deno.test("includeArguments writes the raw arguments into the file", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "audit.jsonl");
    const { log } = setup({ path, includeArguments: true });
    try {
      log.record(entry(7));
      await log.flush();
      assert.deepEqual((await readLines(path))[0]?.arguments, { n: 7, password: "hunter2" });
    } finally {
      await log.close();
    }
  });
});

Deno.test("arguments that cannot be serialized do not lose the line", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "audit.jsonl");
    const { log } = setup({ path, includeArguments: true });
    try {
      log.record(entry(1, { arguments: { big: 1n } }));
      await log.flush();
      const [line] = await readLines(path);
      assert.equal(line?.tool, "tool_1");
      assert.match(String(line?.argumentsError), /BigInt/);
    } finally {
      await log.close();
    }
  });
});

Deno.test("every decision is published as governance.decision without raw arguments", async () => {
  const { log, events } = setup();
  log.record(entry(1, { verdict: "deny", code: "tool_denied", server: "fs" }));
  assert.deepEqual(events, [{
    type: "governance.decision",
    time: entry(1).time,
    tenant: "acme",
    subject: "alice",
    tool: "tool_1",
    server: "fs",
    effect: "write",
    verdict: "deny",
    code: "tool_denied",
    rule: entry(1).rule,
    argumentsHash: HASH,
  }]);
  assert.ok(!JSON.stringify(events).includes("hunter2"));
  assert.equal(subjectOf(events[0]!), "agent33.mcp.governance.decision");
  await log.close();
});

Deno.test("without a path the log only publishes events", async () => {
  const { log, events } = setup();
  log.record(entry(1));
  await log.flush();
  assert.equal(events.length, 1);
  assert.deepEqual(log.stats(), { written: 0, failed: 0, dropped: 0, queued: 0, rotations: 0 });
  await log.close();
});

Deno.test("time defaults to the clock's now", async () => {
  const { log, events, clock } = setup();
  const { time: _time, ...rest } = entry(1);
  log.record(rest);
  assert.equal((events[0] as { time: string }).time, new Date(clock.now()).toISOString());
  await log.close();
});

Deno.test("record returns before the line is written and never throws", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "audit.jsonl");
    const { log } = setup({ path });
    try {
      log.record(entry(1));
      assert.equal(log.stats().written, 0, "nothing written synchronously");
      assert.equal(log.stats().queued, 1);
      log.record(null as unknown as AuditEntry);
      await log.flush();
      assert.equal(log.stats().written, 1);
    } finally {
      await log.close();
    }
  });
});

Deno.test("the parent directory is created", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a", "b", "audit.jsonl");
    const { log } = setup({ path });
    try {
      log.record(entry(1));
      await log.flush();
      assert.equal((await readLines(path)).length, 1);
    } finally {
      await log.close();
    }
  });
});

Deno.test("the file rotates by size: file → file.1 … file.<keep>, the oldest dropped", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "audit.jsonl");
    const lineBytes =
      new TextEncoder().encode(JSON.stringify(entry(0, { arguments: undefined })) + "\n")
        .byteLength;
    // Two lines per file.
    const { log } = setup({ path, maxBytes: lineBytes * 2 + 1, keep: 2 });
    try {
      for (let n = 0; n < 9; n++) log.record(entry(n));
      await log.flush();
      // 9 lines, 2 per file: 0-1, 2-3, 4-5, 6-7, 8. Only the last three files remain.
      const tools = async (p: string) => (await readLines(p)).map((l) => l.tool);
      assert.deepEqual(await tools(path), ["tool_8"]);
      assert.deepEqual(await tools(`${path}.1`), ["tool_6", "tool_7"]);
      assert.deepEqual(await tools(`${path}.2`), ["tool_4", "tool_5"]);
      await assert.rejects(Deno.stat(`${path}.3`), Deno.errors.NotFound);
      assert.equal(log.stats().rotations, 4);
      for (const p of [path, `${path}.1`, `${path}.2`]) {
        assert.ok((await Deno.stat(p)).size <= lineBytes * 2 + 1);
      }
    } finally {
      await log.close();
    }
  });
});

Deno.test("rotation continues an existing file's size across restarts", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "audit.jsonl");
    const lineBytes =
      new TextEncoder().encode(JSON.stringify(entry(0, { arguments: undefined })) + "\n")
        .byteLength;
    const first = setup({ path, maxBytes: lineBytes * 2 + 1 });
    first.log.record(entry(0));
    await first.log.close();
    const second = setup({ path, maxBytes: lineBytes * 2 + 1 });
    try {
      second.log.record(entry(1));
      second.log.record(entry(2));
      await second.log.flush();
      assert.deepEqual((await readLines(`${path}.1`)).map((l) => l.tool), ["tool_0", "tool_1"]);
      assert.deepEqual((await readLines(path)).map((l) => l.tool), ["tool_2"]);
    } finally {
      await second.log.close();
    }
  });
});

Deno.test("a line larger than maxBytes is written whole, in a file of its own", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "audit.jsonl");
    const { log } = setup({ path, maxBytes: 10, keep: 3 });
    try {
      log.record(entry(1));
      log.record(entry(2));
      await log.flush();
      assert.deepEqual((await readLines(path)).map((l) => l.tool), ["tool_2"]);
      assert.deepEqual((await readLines(`${path}.1`)).map((l) => l.tool), ["tool_1"]);
    } finally {
      await log.close();
    }
  });
});

Deno.test("a write error is logged once and counted, not thrown; events still flow", async () => {
  await withDir(async (dir) => {
    const blocker = join(dir, "not-a-dir");
    await Deno.writeTextFile(blocker, "");
    const { log, lines, events } = setup({ path: join(blocker, "audit.jsonl") });
    try {
      log.record(entry(1));
      log.record(entry(2));
      await log.flush();
      log.record(entry(3));
      await log.flush();
      assert.equal(log.stats().failed, 3);
      assert.equal(log.stats().written, 0);
      assert.equal(
        lines.filter((l) => l.includes("audit log write failed")).length,
        1,
        lines.join("\n"),
      );
      assert.equal(events.length, 3);
    } finally {
      await log.close();
    }
  });
});

Deno.test("a full queue drops the oldest unwritten lines and counts them", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "audit.jsonl");
    const { log, lines } = setup({ path, maxQueued: 2 });
    try {
      // The first line is taken by the writer at once; the rest wait behind it, at most 2.
      for (let n = 0; n < 5; n++) log.record(entry(n));
      assert.equal(log.stats().queued, 3);
      await log.flush();
      assert.deepEqual((await readLines(path)).map((l) => l.tool), ["tool_0", "tool_3", "tool_4"]);
      assert.equal(log.stats().dropped, 2);
      assert.equal(lines.filter((l) => l.includes("audit queue full")).length, 1);
    } finally {
      await log.close();
    }
  });
});

Deno.test("close flushes, is idempotent, and later records are only published", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "audit.jsonl");
    const { log, events } = setup({ path });
    log.record(entry(1));
    await Promise.all([log.close(), log.close()]);
    assert.equal((await readLines(path)).length, 1);
    log.record(entry(2));
    await log.flush();
    assert.equal((await readLines(path)).length, 1);
    assert.equal(log.stats().dropped, 1);
    assert.equal(events.length, 2);
  });
});

Deno.test("options are validated", () => {
  const base = { bus: new InProcessEventBus(), clock: new ManualClock(), logger: silentLogger };
  assert.throws(() => new AuditLog({ ...base, maxBytes: 0 }), RangeError);
  assert.throws(() => new AuditLog({ ...base, keep: -1 }), RangeError);
  assert.throws(() => new AuditLog({ ...base, maxQueued: 0 }), RangeError);
});
