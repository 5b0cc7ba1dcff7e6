/**
 * Pins and quarantines shared by replicas: two SharedPins on ONE MemorySharedState are two
 * replicas' scanners' views.
 */
import assert from "node:assert/strict";
import { MemorySharedState } from "../bus/memory_shared_state.ts";
import { encodeJson, sharedKey } from "../bus/shared_state.ts";
import { silentLogger } from "../support/logger.ts";
import { type PinChange, PINS_BUCKET, SharedPins } from "./shared_pins.ts";

const OLD = "a".repeat(64);
const NEW = "b".repeat(64);
const REASON = "its definition changed since it was first seen (possible rug pull)";

async function two() {
  const state = new MemorySharedState();
  const a = await SharedPins.open(state, { logger: silentLogger, replica: "r1" });
  const b = await SharedPins.open(state, { logger: silentLogger, replica: "r2" });
  const seen: PinChange[] = [];
  const unsubscribe = b.subscribe((change) => seen.push(change));
  return {
    state,
    a,
    b,
    seen,
    close() {
      unsubscribe();
      a.close();
      b.close();
    },
  };
}

/** Lets the background writes and their watch deliveries run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

Deno.test("the first replica to see a tool pins it; a later pin by another replica does not replace it", async () => {
  const { a, b, seen, close } = await two();
  try {
    a.pin("fs", "read", OLD);
    await settle();
    b.pin("fs", "read", NEW);
    await settle();
    assert.deepEqual(seen, [{ kind: "pin", server: "fs", tool: "read", hash: OLD }]);
  } finally {
    close();
  }
});

Deno.test("a quarantine decided on one replica reaches every replica, and so does its release", async () => {
  const { a, b, seen, close } = await two();
  try {
    a.pin("fs", "read", OLD);
    a.quarantine("fs", "read", NEW, REASON);
    await settle();
    assert.deepEqual(seen.at(-1), {
      kind: "quarantine",
      server: "fs",
      tool: "read",
      hash: NEW,
      reason: REASON,
      replica: "r1",
    });
    b.release("fs", "read", NEW, "admin-token");
    await settle();
    assert.deepEqual(seen.slice(-2), [
      { kind: "release", server: "fs", tool: "read", hash: NEW, by: "admin-token" },
      { kind: "pin", server: "fs", tool: "read", hash: NEW },
    ]);
  } finally {
    close();
  }
});

Deno.test("a replica starting later is handed the current pins and quarantines first", async () => {
  const { state, a, close } = await two();
  try {
    a.pin("fs", "read", OLD);
    a.quarantine("fs", "read", NEW, REASON);
    await settle();
    const late = await SharedPins.open(state, { logger: silentLogger });
    const seen: PinChange[] = [];
    late.subscribe((change) => seen.push(change));
    assert.deepEqual(seen.map((c) => c.kind), ["pin", "quarantine"]);
    late.close();
  } finally {
    close();
  }
});

Deno.test("a malformed or misplaced entry in the pins bucket is ignored", async () => {
  const { state, seen, close } = await two();
  try {
    const bucket = await state.bucket(PINS_BUCKET);
    await bucket.put(sharedKey("quarantine", "fs", "read"), encodeJson({ server: "fs" }));
    // A valid record under another tool's key must not quarantine that tool.
    await bucket.put(
      sharedKey("quarantine", "fs", "write"),
      encodeJson({ server: "fs", tool: "read", hash: NEW, reason: REASON }),
    );
    await settle();
    assert.deepEqual(seen, []);
  } finally {
    close();
  }
});
