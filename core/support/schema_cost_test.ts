import assert from "node:assert/strict";
import { SchemaCost } from "./schema_cost.ts";
import { doubling, shapes } from "../../tests/support/hostile_schemas.ts";

Deno.test("a value costs the keywords of every schema node that applies to it", () => {
  const cost = new SchemaCost({ type: "object", properties: { a: { type: "string" } } });
  // The arguments object: its node (1) with `type` and `properties` (one entry); `a`: 1 + type.
  assert.equal(cost.work({ a: "x" }, Infinity), 3 + 2);
});

Deno.test("a property costs only the subschema its name selects, not its siblings'", () => {
  const wide = Object.fromEntries(
    Array.from({ length: 100 }, (_, i) => [`p${i}`, { type: "object", required: ["a", "b"] }]),
  );
  const cost = new SchemaCost({ type: "object", properties: wide });
  const one = cost.work({ p0: {} }, Infinity);
  const two = cost.work({ p0: {}, p1: {} }, Infinity);
  assert.equal(two - one, 5, "its own node: 1, type, required (the list and its 2 names)");
});

Deno.test("branches that apply in place multiply what each item costs", () => {
  const ten = new SchemaCost(shapes(10)).work({ items: [{}, {}] }, Infinity);
  const hundred = new SchemaCost(shapes(100)).work({ items: [{}, {}] }, Infinity);
  assert.ok(hundred > 9 * ten, `${hundred} against ${ten}`);
});

Deno.test("a $ref applied twice at each level costs twice as much per level", () => {
  const at = (depth: number) => new SchemaCost(doubling(depth)).work({ x: "a" }, Infinity);
  const ratio = at(21) / at(20);
  assert.ok(ratio > 1.9 && ratio < 2.1, `ratio ${ratio}`);
});

Deno.test("a recursive schema costs each level of the value once, not without end", () => {
  const tree = {
    $defs: {
      node: {
        type: "object",
        properties: { children: { type: "array", items: { $ref: "#/$defs/node" } } },
      },
    },
    $ref: "#/$defs/node",
  };
  const cost = new SchemaCost(tree);
  let value: Record<string, unknown> = {};
  const shallow = cost.work(value, Infinity);
  for (let i = 0; i < 50; i++) value = { children: [value] };
  const deep = cost.work(value, Infinity);
  assert.ok(Number.isFinite(deep) && deep < 60 * 20 * shallow, `${deep}`);
});

Deno.test("a schema that applies itself in place costs without end", () => {
  const cost = new SchemaCost({
    definitions: { a: { allOf: [{ $ref: "#" }] } },
    $ref: "#/definitions/a",
  });
  assert.equal(cost.perValue, Infinity);
});

Deno.test("references resolve through nested $id bases and $anchor names", () => {
  const inner = { type: "object", required: Array.from({ length: 500 }, (_, i) => `r${i}`) };
  const viaId = new SchemaCost({
    $defs: { item: { $id: "https://example.com/item.json", $defs: { big: inner } } },
    properties: { a: { $ref: "https://example.com/item.json#/$defs/big" } },
  });
  const viaAnchor = new SchemaCost({
    $defs: { big: { ...inner, $anchor: "big" } },
    properties: { a: { $ref: "#big" } },
  });
  for (const cost of [viaId, viaAnchor]) assert.ok(cost.work({ a: {} }, Infinity) > 500);
});

Deno.test("a dynamic reference costs every node it may name, not only its static target", () => {
  const costly = { $dynamicAnchor: "t", required: Array.from({ length: 500 }, (_, i) => `r${i}`) };
  const cost = new SchemaCost({
    $schema: "https://json-schema.org/draft/2020-12/schema",
    $defs: { cheap: { $dynamicAnchor: "t" }, wrapper: { $id: "https://example.com/w", ...costly } },
    properties: { a: { $dynamicRef: "#t" } },
  });
  assert.ok(cost.work({ a: {} }, Infinity) > 500);
});

Deno.test("a reference this cannot follow is costed high at every depth", () => {
  const cost = new SchemaCost({
    properties: { a: { $ref: "http://json-schema.org/draft-07/schema#" } },
  });
  assert.ok(cost.work({ a: { b: { c: 1 } } }, Infinity) > 3_000);
});

Deno.test("a pattern costs per character of the text it runs over, and per property name", () => {
  const text = new SchemaCost({ properties: { a: { type: "string", pattern: "^[a-z]+$" } } });
  const short = text.work({ a: "x" }, Infinity);
  const long = text.work({ a: "x".repeat(10_001) }, Infinity);
  assert.ok(long - short >= 50_000, `${long - short}`);
  const names = new SchemaCost({ patternProperties: { "^p": {}, "^q": {} } });
  assert.ok(names.work({ ["p".repeat(1000)]: 1 }, Infinity) > 2 * 5 * 1000);
});

Deno.test("a schema with more states than the table holds starts it again, counts the same, and is not kept", () => {
  // 2,000 levels, each its own state of ~60 in-place branches: 120,000 entries, past the bound.
  const branches = Array.from({ length: 59 }, (_, i) => ({ required: [`r${i}`] }));
  let schema: Record<string, unknown> = { type: "string" };
  let value: unknown = "leaf";
  for (let level = 2_000; level > 0; level--) {
    schema = { anyOf: [...branches, {}], properties: { [`p${level}`]: schema } };
    value = { [`p${level}`]: value };
  }
  const cost = new SchemaCost(schema);
  const first = cost.work(value, Infinity);
  assert.ok(Number.isFinite(first) && first > 2_000 * 60, `${first}`);
  assert.equal(cost.work(value, Infinity), first);
  assert.equal(cost.keptEntries, 0, "a table this large is not kept between calls");
  const small = new SchemaCost({ type: "object", properties: { a: { type: "string" } } });
  small.work({ a: "x" }, Infinity);
  assert.ok(small.keptEntries > 0, "a real schema's table is kept");
});

Deno.test("a chain of in-place subschemas is costed, and its expansions are not kept between calls", () => {
  // Each of 500 nodes applies the next in place: node i expands to the 500 - i after it.
  let schema: Record<string, unknown> = { type: "object" };
  for (let i = 0; i < 500; i++) schema = { required: [`r${i}`], allOf: [schema] };
  const cost = new SchemaCost(schema);
  assert.ok(cost.work({}, Infinity) >= 500 * 3);
  assert.equal(cost.keptEntries, 0);
});

Deno.test("work stops counting once past its limit", () => {
  const cost = new SchemaCost(shapes(100));
  const items = Array.from({ length: 1_000_000 }, () => ({}));
  const work = cost.work({ items }, 1_000);
  assert.ok(work > 1_000 && work < 10_000, `${work}`);
});
