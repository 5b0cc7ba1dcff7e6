import assert from "node:assert/strict";
import { hex32, TraceId } from "./span_ids.ts";

Deno.test("A trace id read from hex turns back into the same hex, word by word", () => {
  const id = TraceId.fromHex("4bf92f3577b34da6a3ce929d0e0e4736");
  assert.deepEqual([id.w0, id.w1, id.w2, id.w3], [0x4bf92f35, 0x77b34da6, 0xa3ce929d, 0x0e0e4736]);
  assert.equal(new TraceId(id.w0, id.w1, id.w2, id.w3).hex, "4bf92f3577b34da6a3ce929d0e0e4736");
});

Deno.test("A word is 8 lower-case hex digits, zero-padded", () => {
  assert.equal(hex32(0), "00000000");
  assert.equal(hex32(0xab), "000000ab");
  assert.equal(hex32(0xffffffff), "ffffffff");
});

Deno.test("Random trace ids are 32 hex digits and differ", () => {
  const ids = new Set(Array.from({ length: 1000 }, () => TraceId.random().hex));
  assert.equal(ids.size, 1000);
  for (const id of ids) assert.match(id, /^[0-9a-f]{32}$/);
});
