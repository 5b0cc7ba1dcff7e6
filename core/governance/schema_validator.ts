/**
 * JSON Schema validation of tool arguments with ajv (the SDK's validator): draft-07 by default,
 * 2020-12 when the schema says so, every failing path reported, each schema compiled once;
 * patterns run in linear time (support/linear_pattern.ts), whoever wrote them.
 * @module
 */
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { linearRegExpEngine } from "../support/linear_pattern.ts";

/** The outcome of validating one value. */
export type ValidationResult = { valid: true } | { valid: false; errors: string[] };

/** A compiled schema. */
export type Validator = (value: unknown) => ValidationResult;

// Patterns in linear time (support/linear_pattern.ts): an upstream's schema meets every caller's input.
const options = {
  allErrors: true,
  strict: false,
  validateFormats: true,
  code: { regExp: linearRegExpEngine },
} as const;
const draft07 = new Ajv(options);
const draft2020 = new Ajv2020(options);
addFormats.default(draft07);
addFormats.default(draft2020);

// Compiled validators by schema identity and by content, so descriptors re-fetched from an
// upstream after list_changed do not recompile.
const byObject = new WeakMap<object, Validator>();
const byText = new Map<string, Validator>();
const MAX_CACHED = 5_000;

/** Compiles a schema (cached); throws TypeError naming the problem when it is not valid JSON Schema. */
export function compileSchema(schema: Record<string, unknown>): Validator {
  const cached = byObject.get(schema);
  if (cached) return cached;
  const text = JSON.stringify(schema);
  let validator = byText.get(text);
  if (!validator) {
    const ajv = String(schema.$schema ?? "").includes("2020-12") ? draft2020 : draft07;
    let fn: ValidateFunction;
    try {
      // A copy without $id: two upstreams may reuse an $id for different schemas.
      const { $id: _id, ...rest } = schema;
      fn = ajv.compile(rest);
    } catch (error) {
      throw new TypeError(`not a valid JSON Schema: ${(error as Error).message}`);
    }
    validator = (value) =>
      fn(value) ? { valid: true } : { valid: false, errors: describe(fn.errors) };
    if (byText.size >= MAX_CACHED) byText.delete(byText.keys().next().value!);
    byText.set(text, validator);
  }
  byObject.set(schema, validator);
  return validator;
}

/** One line per failing path, e.g. `/path must match pattern "^/data/"`. */
function describe(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => {
    const at = e.instancePath || "(arguments)";
    if (e.keyword === "required") {
      return `${at === "(arguments)" ? "" : at}/${
        (e.params as { missingProperty: string }).missingProperty
      } is required`;
    }
    if (e.keyword === "additionalProperties") {
      return `${at === "(arguments)" ? "" : at}/${
        (e.params as { additionalProperty: string }).additionalProperty
      } is not an accepted argument`;
    }
    if (e.keyword === "enum") {
      return `${at} must be one of ${
        JSON.stringify((e.params as { allowedValues: unknown[] }).allowedValues)
      }`;
    }
    return `${at} ${e.message ?? "is invalid"}`;
  });
}
