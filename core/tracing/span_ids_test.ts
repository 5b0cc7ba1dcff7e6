import assert from "node:assert/strict";
import { hex32, randomWord, traceHex, traceparent } from "./span_ids.ts";

Deno.test("A trace id's words are its 32 hex digits in order", () => {
  assert.equal(
    traceHex(0x4bf92f35, 0x77b34da6, 0xa3ce929d, 0x0e0e4736),
    "4bf92f3577b34da6a3ce929d0e0e4736",
  );
});

Deno.test("A word is 8 lower-case hex digits, zero-padded", () => {
  assert.equal(hex32(0), "00000000");
  assert.equal(hex32(0xab), "000000ab");
  assert.equal(hex32(0xffffffff), "ffffffff");
});

Deno.test("Random words are 32-bit and differ", () => {
  const words = Array.from({ length: 1000 }, () => randomWord());
  assert.ok(words.every((w) => Number.isInteger(w) && w >= 0 && w < 2 ** 32));
  assert.ok(new Set(words).size > 990);
});

Deno.test("A traceparent is version 00, the trace id, the span id and the sampled flag, dash-separated", () => {
  const words = [0x4bf92f35, 0x77b34da6, 0xa3ce929d, 0x0e0e4736, 0x00f067aa, 0x0ba902b7] as const;
  assert.equal(
    traceparent(...words, true),
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
  );
  assert.equal(
    traceparent(0, 0, 0, 1, 0xffffffff, 2, false),
    `00-${"0".repeat(31)}1-ffffffff00000002-00`,
  );
});
