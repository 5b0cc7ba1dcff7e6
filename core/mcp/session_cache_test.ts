import assert from "node:assert/strict";
import { SessionCache } from "./session_cache.ts";

interface Copy {
  pinned: boolean;
}

Deno.test("past its bound the cache drops the least recently used copy", () => {
  const cache = new SessionCache<Copy>(2, (c) => c.pinned);
  cache.set("a", { pinned: false });
  cache.set("b", { pinned: false });
  cache.get("a");
  const dropped = cache.set("c", { pinned: false });
  assert.deepEqual(dropped.map(([id]) => id), ["b"]);
  assert.deepEqual([...cache.entries()].map(([id]) => id), ["a", "c"]);
});

Deno.test("a pinned copy is never dropped to make room; the bound waits for an unpinned one", () => {
  const cache = new SessionCache<Copy>(1, (c) => c.pinned);
  cache.set("listening", { pinned: true });
  assert.deepEqual(cache.set("b", { pinned: false }), []);
  assert.equal(cache.size, 2);
  assert.deepEqual(cache.set("c", { pinned: false }).map(([id]) => id), ["b"]);
});

Deno.test("evictOne takes the least recently used unpinned copy that passes the filter", () => {
  const cache = new SessionCache<Copy & { tenant: string }>(10, (c) => c.pinned);
  cache.set("a", { pinned: false, tenant: "x" });
  cache.set("b", { pinned: true, tenant: "y" });
  cache.set("c", { pinned: false, tenant: "y" });
  assert.equal(cache.evictOne((c) => c.tenant === "y")?.[0], "c");
  assert.equal(cache.evictOne((c) => c.tenant === "y"), undefined);
  assert.equal(cache.peek("a")?.tenant, "x");
});
