import assert from "node:assert/strict";
import { principalOf } from "../auth/token_payload.ts";
import { ManualClock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import { createLogger } from "../support/logger.ts";
import { ApprovalQueue, type ApprovalRequestInput } from "./approval_queue.ts";
import { type ApprovalState, ApprovalStore } from "./approval_store.ts";
import { ApprovalTokens } from "./approval_tokens.ts";
import { MemoryNonceStore } from "./nonce_store.ts";
import { approver as by } from "../../tests/support/deciders.ts";

const SECRET = "an-approval-secret-that-is-at-least-32-bytes-long";
const MINUTE = 60_000;

const ALICE = {
  tenant: "acme",
  subject: "alice",
  principal: principalOf("tokens_file", "alice"),
};

function input(n: number): ApprovalRequestInput {
  return {
    ...ALICE,
    tool: "fs__delete",
    server: "fs",
    effect: "destructive",
    arguments: { path: `/srv/${n}`, note: 'line one\nline two \u2028 "quoted"' },
    argumentsHash: String(n % 10).repeat(64),
  };
}

/** A queue, its tokens and nonces, persisted to `path`, as the kernel wires them. */
function gateway(path: string, clock: ManualClock, initial?: ApprovalState) {
  const logs: string[] = [];
  const nonces = new MemoryNonceStore({ clock, ...(initial ? { initial: initial.nonces } : {}) });
  const queued: { queue?: ApprovalQueue } = {};
  const store = new ApprovalStore({
    path,
    clock,
    logger: createLogger({ level: "debug", sink: (line) => void logs.push(line) }),
    snapshot: () => ({ approvals: queued.queue!.records(), nonces: nonces.entries() }),
  });
  const tokens = new ApprovalTokens({
    secret: SECRET,
    clock,
    ttlMs: 10 * MINUTE,
    nonces: {
      async consume(nonce, expiresAt) {
        const first = await nonces.consume(nonce, expiresAt);
        if (first) await store.save();
        return first;
      },
    },
  });
  const queue = queued.queue = new ApprovalQueue({
    clock,
    bus: new InProcessEventBus(),
    tokens,
    ttlMs: 10 * MINUTE,
    onChange: () => store.save(),
  });
  if (initial) queue.restore(initial.approvals);
  return { queue, tokens, store, logs };
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "agent33-approvals-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("approvals round-trip through the file: pending, approved with its token, denied, and used nonces", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/state/approvals.json`;
    const clock = new ManualClock(1_700_000_000_000);
    const first = gateway(path, clock);
    const pending = first.queue.request(input(1));
    const approved = first.queue.request(input(2));
    const denied = first.queue.request(input(3));
    const redeemed = first.queue.request(input(4));
    const { token } = await first.queue.approve(approved.id, by("bob"));
    first.queue.deny(denied.id, by("bob"), "not today\r\nX-Injected: yes");
    const used = await first.queue.approve(redeemed.id, by("bob"));
    const grant = { tenant: "acme", tool: "fs__delete", argumentsHash: "4".repeat(64) };
    assert.equal((await first.tokens.verify(used.token, grant)).ok, true);
    await first.store.flush();
    assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600, "tokens at rest: owner only");
    assert.deepEqual(
      [...Deno.readDirSync(`${dir}/state`)].map((e) => e.name),
      ["approvals.json"],
      "no temp file is left behind",
    );

    clock.advance(MINUTE);
    const loaded = await first.store.load();
    assert.equal(loaded.dropped, 0);
    const second = gateway(path, clock, loaded);
    const byId = new Map(second.queue.list().map((r) => [r.id, r]));
    assert.equal(byId.get(pending.id)?.status, "pending");
    assert.deepEqual(byId.get(pending.id)?.arguments, input(1).arguments);
    assert.equal(byId.get(denied.id)?.reason, "not today\r\nX-Injected: yes");
    assert.equal(
      second.queue.tokenFor(approved.id, ALICE).token,
      token,
      "the token can be fetched",
    );
    const again = await second.tokens.verify(used.token, grant);
    assert.equal(again.ok, false);
    assert.equal((again as { code: string }).code, "approval_replayed", "no replay after restart");
    const fresh = await second.tokens.verify(token, { ...grant, argumentsHash: "2".repeat(64) });
    assert.equal(fresh.ok, true, "an unredeemed token still works once");
    // An identical request joins the restored pending one instead of filing a second.
    assert.equal(second.queue.request(input(1)).id, pending.id);
    await second.store.flush();
  });
});

Deno.test("expired requests, tokens and nonces are dropped on load", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/approvals.json`;
    const clock = new ManualClock(1_700_000_000_000);
    const first = gateway(path, clock);
    const old = first.queue.request(input(1));
    const oldApproved = first.queue.request(input(2));
    const { token } = await first.queue.approve(oldApproved.id, by("bob"));
    await first.tokens.verify(token, {
      ...ALICE,
      tool: "fs__delete",
      argumentsHash: "2".repeat(64),
    });
    clock.advance(5 * MINUTE);
    const recent = first.queue.request(input(3));
    await first.store.flush();

    clock.advance(6 * MINUTE); // the first two lapsed, and the redeemed token expired
    const loaded = await first.store.load();
    assert.deepEqual(loaded.approvals.map((r) => r.id), [recent.id]);
    assert.deepEqual(loaded.nonces, []);
    assert.equal(loaded.dropped, 3);
    assert.ok(!loaded.approvals.some((r) => r.id === old.id));
  });
});

Deno.test("a corrupt file is moved aside with a loud error, the gateway starts empty, and the next save does not touch the copy", async () => {
  for (
    const [what, text] of [
      ["not JSON", '{"version": 1, "approvals": ['],
      ["wrong shape", JSON.stringify({ version: 1, approvals: [{ id: 1 }], nonces: [] })],
      ["unknown version", JSON.stringify({ version: 9, approvals: [], nonces: [] })],
    ]
  ) {
    await withDir(async (dir) => {
      const path = `${dir}/approvals.json`;
      await Deno.writeTextFile(path, text!);
      const clock = new ManualClock(Date.UTC(2026, 0, 2, 3, 4, 5));
      const { store, logs, queue } = gateway(path, clock);
      const loaded = await store.load();
      assert.deepEqual([loaded.approvals, loaded.nonces], [[], []], what);
      assert.equal(loaded.corruptMovedTo, `${path}.corrupt-2026-01-02T03-04-05.000Z`);
      assert.equal(await Deno.readTextFile(loaded.corruptMovedTo!), text, "every byte is kept");
      const line = logs.join("\n");
      assert.match(line, /APPROVALS FILE CORRUPT/);
      assert.ok(line.includes(path) && line.includes(loaded.corruptMovedTo!), line);
      assert.match(line, /move it back/);
      queue.request(input(1));
      await store.flush();
      assert.equal(await Deno.readTextFile(loaded.corruptMovedTo!), text);
      assert.equal(JSON.parse(await Deno.readTextFile(path)).approvals.length, 1);
    });
  }
});

Deno.test("a missing file is an empty start; an unreadable one stops the start naming the file", async () => {
  await withDir(async (dir) => {
    const clock = new ManualClock(0);
    const missing = await gateway(`${dir}/none.json`, clock).store.load();
    assert.deepEqual(missing, { approvals: [], nonces: [], dropped: 0 });
    // A directory where the file should be: cannot be read as a file.
    await Deno.mkdir(`${dir}/dir.json`);
    await assert.rejects(
      gateway(`${dir}/dir.json`, clock).store.load(),
      (e: GatewayError) =>
        e.code === "config_invalid" && e.message.includes(`${dir}/dir.json`) &&
        /MCP_APPROVALS_PATH/.test(e.message),
    );
  });
});

Deno.test("a save that cannot be written rejects naming the file, and a redeemed token fails closed", async () => {
  await withDir(async (dir) => {
    // The parent "directory" is a file: nothing can be created under it.
    await Deno.writeTextFile(`${dir}/blocker`, "");
    const clock = new ManualClock(1_700_000_000_000);
    const { queue, tokens, logs } = gateway(`${dir}/blocker/approvals.json`, clock);
    const request = queue.request(input(5));
    const { token } = await queue.approve(request.id, by("bob"));
    await assert.rejects(
      tokens.verify(token, { ...ALICE, tool: "fs__delete", argumentsHash: "5".repeat(64) }),
      (e: GatewayError) => e.message.includes(`${dir}/blocker/approvals.json`),
    );
    assert.match(logs.join("\n"), /Cannot save approvals to .*blocker\/approvals\.json/);
  });
});

Deno.test("saves requested while one is written share the next write", async () => {
  await withDir(async (dir) => {
    let snapshots = 0;
    const store = new ApprovalStore({
      path: `${dir}/approvals.json`,
      clock: new ManualClock(0),
      logger: createLogger({ sink: () => {} }),
      snapshot: () => (snapshots++, { approvals: [], nonces: [] }),
    });
    const writes = Array.from({ length: 20 }, () => store.save());
    await Promise.all(writes);
    assert.ok(snapshots <= 2, `${snapshots} writes for 20 saves`);
  });
});
