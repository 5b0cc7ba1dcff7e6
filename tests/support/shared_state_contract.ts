/**
 * The rules every SharedState implementation keeps, as one test list run against each (the
 * in-process one and the JetStream one), so the two cannot drift apart.
 * @module
 */
import assert from "node:assert/strict";
import {
  decodeJson,
  encodeJson,
  type SharedBucket,
  type SharedChange,
  type SharedState,
} from "../../core/bus/shared_state.ts";
import { settlesWithin, systemClock } from "../../core/support/clock.ts";

/** One backend under test: two handles on the same state, as two replicas would hold. */
export interface SharedStateUnderTest {
  a: SharedState;
  b: SharedState;
  stop(): Promise<void>;
}

/** Registers the contract's tests for one backend; `open` gives two replicas' handles. */
export function sharedStateContract(
  backend: string,
  open: () => Promise<SharedStateUnderTest>,
  options: { ignore?: boolean } = {},
): void {
  const rule = (name: string, fn: (s: SharedStateUnderTest, bucket: string) => Promise<void>) =>
    Deno.test({
      name: `${backend} shared state: ${name}`,
      ignore: options.ignore ?? false,
      async fn() {
        const s = await open();
        try {
          await fn(s, `t${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`);
        } finally {
          await s.stop();
        }
      },
    });

  rule("a value written through one replica is read through the other", async (s, name) => {
    const a = await s.a.bucket(name);
    const b = await s.b.bucket(name);
    const revision = await a.put("k1", encodeJson({ n: 1 }));
    const entry = await b.get("k1");
    assert.deepEqual(entry && { ...entry, value: decodeJson(entry.value) }, {
      key: "k1",
      value: { n: 1 },
      revision,
    });
    assert.equal(await b.get("absent"), null);
  });

  rule("create succeeds for exactly one of two replicas", async (s, name) => {
    const a = await s.a.bucket(name);
    const b = await s.b.bucket(name);
    const results = await Promise.all([
      a.create("once", encodeJson("a")),
      b.create("once", encodeJson("b")),
    ]);
    assert.equal(results.filter((r) => r !== null).length, 1);
  });

  rule("update is compare-and-set on the revision", async (s, name) => {
    const a = await s.a.bucket(name);
    const b = await s.b.bucket(name);
    const first = await a.put("doc", encodeJson(1));
    const second = await b.update("doc", encodeJson(2), first);
    assert.ok(second !== null && second > first);
    assert.equal(await a.update("doc", encodeJson(3), first), null, "a stale revision loses");
    assert.deepEqual(decodeJson((await a.get("doc"))!.value), 2);
  });

  rule("a deleted key reads as absent and can be created again", async (s, name) => {
    const a = await s.a.bucket(name);
    await a.put("gone", encodeJson(1));
    await a.delete("gone");
    assert.equal(await (await s.b.bucket(name)).get("gone"), null);
    assert.deepEqual(await a.keys(), []);
    assert.notEqual(await a.create("gone", encodeJson(2)), null);
  });

  rule("keys names each key once, even while another replica rewrites one", async (s, name) => {
    const a = await s.a.bucket(name);
    const b = await s.b.bucket(name);
    const written = Array.from({ length: 50 }, (_, i) => `k${i}`);
    for (const key of written) await a.put(key, encodeJson(0));
    // A listing reads the bucket while heartbeats keep landing: a key rewritten mid-read must
    // still be named once (JetStream's key listing delivers such a key a second time).
    for (let round = 0; round < 5; round++) {
      const keys = await whileRewriting(a, "k0", () => b.keys());
      assert.deepEqual([...keys].sort(), [...written].sort(), `round ${round}`);
    }
  });

  rule("keys ends while other replicas write faster than it reads", async (s, name) => {
    const a = await s.a.bucket(name);
    const b = await s.b.bucket(name);
    await a.put("steady", encodeJson(0));
    await a.put("busy", encodeJson(0));
    // JetStream's own listing waits for nothing to be pending, which writers that never pause
    // put off for ever (CI hung here): the listing must end at what was there when it began.
    const keys = await whileRewriting(a, "busy", async () => {
      const listing = b.keys();
      assert.ok(await settlesWithin(systemClock, 10_000, listing), "the listing did not end");
      return await listing;
    }, 8);
    assert.deepEqual([...keys].sort(), ["busy", "steady"]);
  });

  rule(
    "a watch starts with the current values, then sees writes and deletes from any replica",
    async (s, name) => {
      const a = await s.a.bucket(name);
      const b = await s.b.bucket(name);
      await a.put("old", encodeJson("x"));
      const seen: { key: string; value: unknown }[] = [];
      let wake = () => {};
      const stop = await b.watch((c: SharedChange) => {
        seen.push({ key: c.key, value: c.value && decodeJson(c.value) });
        wake();
      });
      try {
        await a.put("new", encodeJson("y"));
        await a.delete("old");
        while (seen.length < 3) await new Promise<void>((r) => wake = r);
        assert.deepEqual(seen, [
          { key: "old", value: "x" },
          { key: "new", value: "y" },
          { key: "old", value: null },
        ]);
      } finally {
        stop();
      }
    },
  );

  rule("a key that is not dot-separated safe tokens is refused, not escaped", async (s, name) => {
    const a = await s.a.bucket(name);
    for (const bad of ["", "a b", "a..b", "a.*", "a.>", "x\ny", "ü"]) {
      await assert.rejects(() => a.put(bad, encodeJson(1)), /not a shared-state key/, bad);
    }
  });

  rule("a message published on a subject reaches the other replica's subscriber", async (s) => {
    const subject = `s.${crypto.randomUUID().replaceAll("-", "")}`;
    const got = new Promise<string>((resolve) => {
      const stop = s.b.subscribe(subject, (data) => {
        stop();
        resolve(new TextDecoder().decode(data));
      });
    });
    // A subscription reaches a remote server asynchronously; publish until it is heard.
    let heard = false;
    void got.then(() => heard = true);
    for (let i = 0; i < 50 && !heard; i++) {
      s.a.publish(subject, new TextEncoder().encode("hello"));
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(await got, "hello");
  });
}

/** Runs `read` while `writers` loops keep rewriting `key` in `bucket`; all stop when it ends. */
async function whileRewriting<T>(
  bucket: SharedBucket,
  key: string,
  read: () => Promise<T>,
  writers = 1,
): Promise<T> {
  let writing = true;
  const loops = Array.from({ length: writers }, async () => {
    for (let n = 0; writing; n++) await bucket.put(key, encodeJson(n));
  });
  try {
    return await read();
  } finally {
    writing = false;
    await Promise.all(loops);
  }
}
