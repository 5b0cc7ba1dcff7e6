import assert from "node:assert/strict";
import { countValues, nestedDeeperThan } from "./json_size.ts";

/** `levels` objects, each holding the next (an array every other level). */
function nested(levels: number): unknown {
  let value: unknown = "leaf";
  for (let i = 0; i < levels; i++) value = i % 2 ? [value] : { a: value };
  return value;
}

Deno.test("a value nested exactly to the limit is within it, one level more is past it", () => {
  assert.equal(nestedDeeperThan(nested(512), 512), false);
  assert.equal(nestedDeeperThan(nested(513), 512), true);
  assert.equal(nestedDeeperThan("text", 0), false);
  assert.equal(nestedDeeperThan({}, 0), true);
});

Deno.test("depth is found without recursion, however deep the value", () => {
  assert.equal(nestedDeeperThan(nested(1_000_000), 512), true);
});

Deno.test("wide values are as deep as their deepest branch", () => {
  const wide = { a: Array.from({ length: 10_000 }, () => ({ b: 1 })), deep: nested(600) };
  assert.equal(nestedDeeperThan(wide, 512), true);
  assert.equal(nestedDeeperThan({ a: wide.a }, 512), false);
});

Deno.test("countValues counts every value, itself included, up to its limit", () => {
  assert.equal(countValues({ a: [1, 2, { b: null }] }, 100), 6);
  assert.equal(countValues("text", 100), 1);
  assert.equal(countValues({ a: [1, 2, { b: null }] }, 6), 6);
  assert.equal(countValues({ a: [1, 2, { b: null }] }, 3), 3);
});

Deno.test("countValues stops at its limit without walking the rest", () => {
  const huge = Array.from({ length: 1_000_000 }, () => ({ a: 1 }));
  assert.equal(countValues(huge, 65), 65);
});
