import assert from "node:assert/strict";
import { sha256, timingSafeEqual, toHex } from "./digest.ts";

Deno.test("sha256 hex matches what sha256sum prints", () => {
  assert.equal(
    toHex(sha256("abc")),
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
});

Deno.test("timingSafeEqual accepts equal digests", () => {
  assert.equal(timingSafeEqual(sha256("a"), sha256("a")), true);
});

Deno.test("timingSafeEqual rejects digests differing in the last byte", () => {
  assert.equal(timingSafeEqual(new Uint8Array([1, 2, 3]), new Uint8Array([1, 2, 4])), false);
});

Deno.test("timingSafeEqual rejects inputs of different length", () => {
  assert.equal(timingSafeEqual(new Uint8Array([1]), new Uint8Array([1, 0])), false);
});
