/**
 * JSON Schemas an upstream could advertise to make checking arguments costly, for the tests of
 * the work bound (core/support/schema_cost.ts, core/governance/schema_validator.ts).
 * @module
 */

/** `depth` definitions, each applying the next twice in place, the last being `last`. */
function doublingDefinitions(depth: number, last: unknown): Record<string, unknown> {
  const definitions: Record<string, unknown> = { [`d${depth}`]: last };
  for (let i = 0; i < depth; i++) {
    const next = { $ref: `#/definitions/d${i + 1}` };
    definitions[`d${i}`] = { allOf: [next, next] };
  }
  return definitions;
}

/** A property `x` checked 2^depth times over by doubling definitions. */
export function doubling(depth: number): Record<string, unknown> {
  const definitions = doublingDefinitions(depth, { type: "string" });
  return { type: "object", definitions, properties: { x: { $ref: "#/definitions/d0" } } };
}

/** Arguments (any, even `{}`) checked 2^depth times over by doubling definitions. */
export function doublingArguments(depth: number): Record<string, unknown> {
  const definitions = doublingDefinitions(depth, { type: "object" });
  return { type: "object", definitions, allOf: [{ $ref: "#/definitions/d0" }] };
}

/** Items that may be any of `n` object shapes, the last accepting everything. */
export function shapes(n: number): Record<string, unknown> {
  const anyOf = Array.from({ length: n - 1 }, (_, i) => ({
    type: "object",
    required: [`k${i}`],
  }));
  return {
    type: "object",
    properties: { items: { type: "array", items: { anyOf: [...anyOf, { type: "object" }] } } },
  };
}
