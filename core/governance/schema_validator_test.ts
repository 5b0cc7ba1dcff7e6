import assert from "node:assert/strict";
import { doublingArguments, shapes } from "../../tests/support/hostile_schemas.ts";
import {
  compiledSchemas,
  compileSchema,
  limitCompiledCode,
  MAX_SCHEMA_WORK,
  MAX_VALUES_FOR_ALL_ERRORS,
} from "./schema_validator.ts";

Deno.test("compileSchema reports every failing path, not just the first", () => {
  const validate = compileSchema({
    type: "object",
    properties: { a: { type: "number" }, b: { type: "string", pattern: "^x" } },
    required: ["a", "c"],
    additionalProperties: false,
  });
  const result = validate({ a: "one", b: "y", d: 1 });
  assert.equal(result.valid, false);
  assert.deepEqual(
    (result as { errors: string[] }).errors.sort(),
    [
      '/b must match pattern "^x"',
      "/a must be number",
      "/c is required",
      "/d is not an accepted argument",
    ].sort(),
  );
});

Deno.test("compileSchema validates draft 2020-12 schemas ($defs, prefixItems)", () => {
  const validate = compileSchema({
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: {
      pair: { type: "array", prefixItems: [{ type: "string" }, { $ref: "#/$defs/n" }] },
    },
    $defs: { n: { type: "number" } },
  });
  assert.deepEqual(validate({ pair: ["a", 1] }), { valid: true });
  assert.equal(validate({ pair: ["a", "b"] }).valid, false);
});

Deno.test("compileSchema checks formats", () => {
  const validate = compileSchema({
    type: "object",
    properties: { d: { type: "string", format: "date" } },
  });
  assert.equal(validate({ d: "2026-11-29" }).valid, true);
  assert.equal(validate({ d: "yesterday" }).valid, false);
});

Deno.test("compileSchema refuses a schema that is not JSON Schema with a TypeError", () => {
  assert.throws(() => compileSchema({ type: "no-such-type" }), TypeError);
});

Deno.test("compileSchema compiles a schema once", () => {
  const schema = { type: "object" };
  assert.equal(compileSchema(schema), compileSchema(schema));
  assert.equal(compileSchema({ type: "object" }), compileSchema({ type: "object" }));
});

Deno.test("a tool's inputSchema checks its patterns in linear time, property patterns too", () => {
  const validate = compileSchema({
    type: "object",
    properties: { name: { type: "string", pattern: "^(a+)+$" } },
    patternProperties: { "^(x+x+)+y$": { type: "number" } },
  });
  const hostile = "a".repeat(50_000) + "!";
  const result = validate({ name: hostile, ["x".repeat(50_000)]: 1 });
  assert.equal(result.valid, false);
  assert.match(!result.valid ? result.errors.join("\n") : "", /\/name must match pattern/);
  assert.deepEqual(validate({ name: "aaa" }), { valid: true });
});

Deno.test("a tool's inputSchema with a pattern RE2 cannot run is not a usable schema", () => {
  assert.throws(
    () =>
      compileSchema({ type: "object", properties: { p: { type: "string", pattern: "(?=a)" } } }),
    /not a valid JSON Schema: pattern "\(\?=a\)" cannot be matched in linear time/,
  );
});

Deno.test("uniqueItems compares items as JSON values, whatever their key order", () => {
  const validate = compileSchema({ type: "array", uniqueItems: true });
  assert.deepEqual(validate([{ a: 1, b: [2] }, { b: [2], a: 1 }]), {
    valid: false,
    errors: ["(arguments) must NOT have duplicate items (items ## 0 and 1 are identical)"],
  });
  assert.deepEqual(validate([1, "1", [1], { "1": 1 }, null, true]), { valid: true });
  assert.deepEqual(compileSchema({ type: "array", uniqueItems: false })([1, 1]), { valid: true });
});

Deno.test("uniqueItems is checked in time linear in the array, not by comparing every pair", () => {
  // ajv's own keyword compared every pair of objects: 16,000 took 16 s.
  const validate = compileSchema({ type: "array", uniqueItems: true });
  const items = Array.from({ length: 100_000 }, (_, a) => ({ a }));
  const started = performance.now();
  assert.deepEqual(validate(items), { valid: true });
  assert.ok(performance.now() - started < 30_000, "linear, not quadratic");
  items.push({ a: 99_999 });
  assert.equal(validate(items).valid, false);
});

Deno.test("arguments of more than MAX_VALUES_FOR_ALL_ERRORS values are checked up to their first problem", () => {
  const branches = Array.from({ length: 100 }, (_, i) => ({ type: "object", required: [`k${i}`] }));
  const validate = compileSchema({ type: "array", items: { anyOf: branches } });
  // Every error collected, these 50,000 records made 5,050,000 of them (1.2 GB of heap). (Past
  // the default work limit too: that refusal is tested on its own.)
  const result = validate(Array.from({ length: 50_000 }, () => ({})), Infinity);
  assert.equal(result.valid, false);
  const errors = result.valid ? [] : result.errors;
  assert.ok(errors.length <= 110, `${errors.length} errors`);
  assert.equal(
    errors.at(-1),
    `(arguments of more than ${MAX_VALUES_FOR_ALL_ERRORS} values are checked up to their first problem)`,
  );
  // Small arguments still get every problem.
  const small = validate([{}, {}]);
  assert.ok(!small.valid && small.errors.some((e) => e.startsWith("/1 ")), "the second item too");
});

Deno.test("arguments whose check would pass MAX_SCHEMA_WORK are refused unchecked, naming the limit", () => {
  const validate = compileSchema(shapes(100));
  // 500,000 records against 100 branches: ~3.7 s of the main thread before this bound.
  const items = Array.from({ length: 500_000 }, () => ({}));
  const result = validate({ items });
  assert.equal(result.valid, false);
  const [line] = result.valid ? [] : result.errors;
  assert.match(line!, /were not checked: .* more than 10,000,000 units .*MCP_MAX_SCHEMA_WORK/);
  assert.match(line!, /send smaller arguments/);
  // The same schema checks arguments of an ordinary size.
  assert.deepEqual(validate({ items: items.slice(0, 100) }), { valid: true });
  assert.equal(MAX_SCHEMA_WORK, 10_000_000);
});

Deno.test("a schema whose any value costs past the limit is refused for every call, naming the fix", () => {
  const validate = compileSchema(doublingArguments(30));
  const result = validate({});
  assert.equal(result.valid, false);
  assert.match(
    result.valid ? "" : result.errors[0]!,
    /must be simplified before this tool can be called/,
  );
});

Deno.test("a higher limit lets the same arguments be checked", () => {
  const validate = compileSchema(shapes(100));
  const items = Array.from({ length: 200_000 }, () => ({}));
  assert.equal(validate({ items }).valid, false);
  assert.deepEqual(validate({ items }, 1e9), { valid: true });
});

/** A schema of `n` string properties unique to `tag` (so it is compiled afresh). */
function wideSchema(tag: string, n = 50): Record<string, unknown> {
  const properties = Object.fromEntries(
    Array.from({ length: n }, (_, i) => [`${tag}${i}`, { type: "string", minLength: 1 }]),
  );
  return { type: "object", properties };
}

Deno.test("compiled validators are dropped past the code budget, oldest unused first, and compiled again when used", () => {
  const undo = limitCompiledCode(Infinity);
  try {
    const schemas = Array.from({ length: 20 }, (_, i) => wideSchema(`evict${i}_`));
    for (const schema of schemas) compileSchema(schema)({});
    const { codeBytes } = compiledSchemas();
    // A budget of about five of them: the rest go, and what ajv kept of them with them.
    limitCompiledCode(codeBytes / 4);
    assert.ok(compiledSchemas().codeBytes <= codeBytes / 4, JSON.stringify(compiledSchemas()));
    // Dropped ones still check, compiled again, within the budget.
    const again = compileSchema(schemas[0]!);
    assert.deepEqual(again({ evict0_0: "" }).valid, false);
    assert.ok(compiledSchemas().codeBytes <= codeBytes / 4);
  } finally {
    undo();
  }
});

Deno.test("a validator in steady use stays compiled while the budget drops the others", () => {
  const undo = limitCompiledCode(Infinity);
  try {
    const kept = wideSchema("kept_");
    const keptValidator = compileSchema(kept);
    const one = compiledSchemas().codeBytes / compiledSchemas().entries;
    // Room for about three: twenty others pass through while `kept` is used between each.
    limitCompiledCode(3 * one);
    for (let i = 0; i < 20; i++) {
      compileSchema(wideSchema(`churn${i}_`));
      assert.equal(compileSchema(kept), keptValidator, `kept compiled again after ${i}`);
    }
    assert.ok(compiledSchemas().entries <= 4, JSON.stringify(compiledSchemas()));
  } finally {
    undo();
  }
});

Deno.test("an upstream past its budget of compiled code gets no new schema compiled, naming why; the rest still check", () => {
  const first = wideSchema("budget_a_");
  const validate = compileSchema(first, "hostile", 1);
  assert.throws(
    () => compileSchema(wideSchema("budget_b_"), "hostile", 1),
    (e: Error) =>
      e instanceof TypeError &&
      /upstream "hostile" has had [\d.]+ MB of validation code compiled/.test(e.message) &&
      /MCP_MAX_SCHEMA_CODE_PER_UPSTREAM/.test(e.message),
  );
  // What it had compiled still checks, and so does another upstream's new schema.
  assert.equal(compileSchema(first, "hostile", 1), validate);
  assert.deepEqual(compileSchema(wideSchema("budget_c_"), "other", 1)({}), {
    valid: true,
  });
});
