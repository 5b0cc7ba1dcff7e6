import assert from "node:assert/strict";
import { parseTraceparent, validTracestate } from "./w3c_trace_context.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN = "00f067aa0ba902b7";

Deno.test("a traceparent's ids are read as big-endian words, and its sampled flag", () => {
  const parent = parseTraceparent(`00-${TRACE}-${SPAN}-01`);
  assert.deepEqual(parent, {
    t0: 0x4bf92f35,
    t1: 0x77b34da6,
    t2: 0xa3ce929d,
    t3: 0x0e0e4736,
    spanHi: 0x00f067aa,
    spanLo: 0x0ba902b7,
    sampled: true,
  });
  assert.equal(parseTraceparent(`00-${TRACE}-${SPAN}-00`)?.sampled, false);
  assert.equal(
    parseTraceparent(`00-${TRACE}-${SPAN}-03`)?.sampled,
    true,
    "other flags are kept out",
  );
});

Deno.test("words with the top bit set are read unsigned", () => {
  const parent = parseTraceparent(`00-ffffffff${TRACE.slice(8)}-ffffffff00000001-01`);
  assert.equal(parent?.t0, 0xffffffff);
  assert.equal(parent?.spanHi, 0xffffffff);
  assert.equal(parent?.spanLo, 1);
});

Deno.test("a traceparent that is not exactly the spec's is treated as absent", () => {
  const bad = [
    `00-${TRACE.toUpperCase()}-${SPAN}-01`, // upper case
    `00-${"0".repeat(32)}-${SPAN}-01`, // zero trace id
    `00-${TRACE}-${"0".repeat(16)}-01`, // zero span id
    `ff-${TRACE}-${SPAN}-01`, // version ff
    `00-${TRACE}-${SPAN}-01-extra`, // version 00 with more
    `00-${TRACE}-${SPAN}-0`, // short
    `00-${TRACE}-${SPAN}-0g`, // a flag that is not hex
    `00_${TRACE}-${SPAN}-01`, // not a dash
    `00-${TRACE.slice(0, 31)}x-${SPAN}-01`,
    `00-${TRACE}-${SPAN.slice(0, 15)}z-01`,
    `01-${TRACE}-${SPAN}-01x`, // a later version's extra part without its dash
    `01-${TRACE}-${SPAN}-01-a b`, // whitespace inside
    "",
    "x".repeat(600),
  ];
  for (const value of bad) assert.equal(parseTraceparent(value), undefined, value);
  for (const value of [undefined, null, 42, {}, [`00-${TRACE}-${SPAN}-01`]]) {
    assert.equal(parseTraceparent(value), undefined, String(value));
  }
});

Deno.test("a later version may append fields after a dash, and padding is trimmed", () => {
  assert.equal(parseTraceparent(`01-${TRACE}-${SPAN}-01-future`)?.spanLo, 0x0ba902b7);
  assert.equal(parseTraceparent(` 00-${TRACE}-${SPAN}-01\t`)?.t3, 0x0e0e4736);
});

Deno.test("a tracestate is kept only when well-formed, beside a valid traceparent", () => {
  const valid = `00-${TRACE}-${SPAN}-01`;
  assert.equal(
    parseTraceparent(valid, "vendor=a, other@tenant=b")?.tracestate,
    "vendor=a,other@tenant=b",
  );
  assert.equal(parseTraceparent(valid, "Bad Key=1")?.tracestate, undefined);
  assert.equal(parseTraceparent(valid, 7)?.tracestate, undefined);
  assert.equal(parseTraceparent("nope", "vendor=a"), undefined);
  assert.equal(
    validTracestate(Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(",")),
    undefined,
  );
  assert.equal(validTracestate("x".repeat(513)), undefined);
});
