import assert from "node:assert/strict";
import { LineFramer } from "./line_framer.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function framer(maxBytes: number, previewBytes = 4) {
  const events: string[] = [];
  const f = new LineFramer(maxBytes, {
    line: (bytes) => events.push(`line ${decoder.decode(bytes)}`),
    oversized: (preview, total) => events.push(`oversized ${decoder.decode(preview)} ${total}`),
  }, previewBytes);
  const push = (...chunks: string[]) => chunks.forEach((c) => f.push(encoder.encode(c)));
  return { f, events, push };
}

Deno.test("LineFramer joins lines split across chunks and splits chunks holding several lines", () => {
  const { events, push } = framer(100);
  push('{"a":', '1}\n{"b":2}\n{"c"', ":3}\n");
  assert.deepEqual(events, ['line {"a":1}', 'line {"b":2}', 'line {"c":3}']);
});

Deno.test("LineFramer reports a line over the bound once and delivers the next line", () => {
  const { events, push } = framer(8);
  push("0123456789ABCDEF\nok\n");
  assert.deepEqual(events, ["oversized 0123 16", "line ok"]);
});

Deno.test("LineFramer skips an oversized line spread over many chunks without buffering it", () => {
  const { events, push } = framer(8);
  push("01234", "56789", "ABCDE", "F\nnext\n");
  assert.deepEqual(events, ["oversized 0123 16", "line next"]);
});

Deno.test("LineFramer delivers an exactly full line and an unterminated last line at end()", () => {
  const { f, events, push } = framer(4);
  push("abcd\ntail");
  f.end();
  assert.deepEqual(events, ["line abcd", "line tail"]);
});

Deno.test("LineFramer reports an oversized unterminated last line at end()", () => {
  const { f, events, push } = framer(4);
  push("abcdefgh");
  f.end();
  assert.deepEqual(events, ["oversized abcd 8"]);
});

Deno.test("LineFramer refuses a bound that is not a positive integer", () => {
  assert.throws(() => new LineFramer(0, { line() {}, oversized() {} }), RangeError);
});

Deno.test("LineFramer reports the last bytes of an oversized line, however it was chunked", () => {
  for (
    const chunks of [["0123456789ABCDEF\n"], ["0123", "4567", "89AB", "CDEF\n"], [
      "0123456789AB",
      "CD",
      "EF",
      "\n",
    ]]
  ) {
    const tails: string[] = [];
    const f = new LineFramer(8, {
      line: () => {},
      oversized: (_preview, _total, tail) => tails.push(decoder.decode(tail)),
    }, 4);
    for (const chunk of chunks) f.push(encoder.encode(chunk));
    assert.deepEqual(tails, ["CDEF"], chunks.join("|"));
  }
});
