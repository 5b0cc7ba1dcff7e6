import assert from "node:assert/strict";
import { SchemaRefs } from "./schema_refs.ts";

Deno.test("a JSON pointer names the node it points at, with ~1 and ~0 unescaped", () => {
  const target = { type: "string" };
  const root = { $defs: { "a/b~c": target } };
  assert.equal(new SchemaRefs(root).resolve(root, "#/$defs/a~1b~0c"), target);
});

Deno.test("a nested $id sets the base its subschemas' references resolve against", () => {
  const big = { type: "object" };
  const from = { $ref: "#/$defs/big" };
  const root = {
    $defs: {
      item: { $id: "https://example.com/item.json", $defs: { big }, properties: { x: from } },
    },
  };
  const refs = new SchemaRefs(root);
  assert.equal(refs.resolve(from, "#/$defs/big"), big, "relative to item.json");
  assert.equal(refs.resolve(root, "https://example.com/item.json#/$defs/big"), big);
});

Deno.test("$anchor, $dynamicAnchor and draft-07's $id: #name name their node", () => {
  const a = { $anchor: "a" }, d = { $dynamicAnchor: "d" }, old = { $id: "#old" };
  const root = { $defs: { a, d, old } };
  const refs = new SchemaRefs(root);
  assert.deepEqual(
    [refs.resolve(root, "#a"), refs.resolve(root, "#d"), refs.resolve(root, "#old")],
    [
      a,
      d,
      old,
    ],
  );
});

Deno.test("a property named like a data keyword still holds a schema, with its own base", () => {
  const from = { $ref: "#/$defs/t" };
  const inner = { type: "number" };
  const property = {
    $id: "https://example.com/e.json",
    $defs: { t: inner },
    properties: { y: from },
  };
  const root = { $defs: { t: { type: "string" } }, properties: { enum: property } };
  assert.equal(new SchemaRefs(root).resolve(from, "#/$defs/t"), inner);
});

Deno.test("a reference to nothing here, or with a broken escape, names nothing", () => {
  const root = { $defs: {} };
  const refs = new SchemaRefs(root);
  for (const ref of ["#/$defs/missing", "#/%E0%A4%A", "other.json", "#nowhere"]) {
    assert.equal(refs.resolve(root, ref), undefined, ref);
  }
});

Deno.test("a dynamic reference may name each $dynamicAnchor of its name, $recursiveRef each $recursiveAnchor", () => {
  const one = { $dynamicAnchor: "n" }, two = { $id: "https://example.com/x", $dynamicAnchor: "n" };
  const rec = { $recursiveAnchor: true };
  const root = { $defs: { one, two, rec, other: { $dynamicAnchor: "m" } } };
  const refs = new SchemaRefs(root);
  assert.deepEqual(refs.dynamicTargets("$dynamicRef", "#n"), [one, two]);
  assert.deepEqual(refs.dynamicTargets("$recursiveRef", "#"), [root, rec]);
  assert.deepEqual(refs.dynamicTargets("$dynamicRef", "#none"), []);
});
