/**
 * JSON Schema validation of tool arguments with ajv (the SDK's validator): draft-07 by default,
 * 2020-12 when the schema says so, every failing path reported (for small arguments; large ones
 * up to their first problem), each schema compiled once. Whoever wrote the schema, a caller's
 * input cannot make one check take more than linear time in the keywords an attacker reaches for:
 * patterns (support/linear_pattern.ts) and `uniqueItems` (canonical JSON keys); and what the
 * schema makes the arguments cost in all is bounded before ajv runs (schema_cost.ts).
 * @module
 */
import {
  Ajv,
  type ErrorObject,
  type Options,
  type SchemaValidateFunction,
  type ValidateFunction,
} from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { linearRegExpEngine } from "../support/linear_pattern.ts";
import { countValues } from "../support/json_size.ts";
import { canonicalJson } from "./canonical_json.ts";
import { MAX_SCHEMA_WORK, SchemaCost } from "../support/schema_cost.ts";

/** The outcome of validating one value. */
export type ValidationResult = { valid: true } | { valid: false; errors: string[] };

/**
 * A compiled schema: checks `value`, refusing it unchecked when checking could take more than
 * `maxWork` units (schema_cost.ts; default {@link MAX_SCHEMA_WORK}).
 */
export type Validator = (value: unknown, maxWork?: number) => ValidationResult;

export { MAX_SCHEMA_WORK };

/**
 * Arguments of at most this many JSON values are checked for every problem; larger ones up to
 * their first. Collecting every error costs the values times the schema's branches: a 4 KiB
 * schema whose items are `anyOf` 100 object branches, and a caller's 50,000 empty objects (150
 * KB), made 5,050,000 errors, 1.2 GB of heap and 8 s with every error collected.
 */
export const MAX_VALUES_FOR_ALL_ERRORS = 64;

/** The two ajv instances of a draft: one stops at the first error, one collects every error. */
function instances(make: (options: Options) => Ajv): { first: Ajv; all: Ajv } {
  const ajvs = [false, true].map((allErrors) => {
    // Patterns in linear time (support/linear_pattern.ts): an upstream's schema meets every
    // caller's input.
    const ajv = make({
      allErrors,
      strict: false,
      validateFormats: true,
      // ajv's optimizer passes are superlinear: 1,500 properties compiled in 826 ms with them
      // and 173 ms without, and validation measured no slower.
      code: { regExp: linearRegExpEngine, optimize: false },
    });
    addFormats.default(ajv);
    linearUniqueItems(ajv);
    return ajv;
  });
  return { first: ajvs[0]!, all: ajvs[1]! };
}

const draft07 = instances((options) => new Ajv(options));
const draft2020 = instances((options) => new Ajv2020(options));

/**
 * `uniqueItems` in time linear in the array's size: ajv compares every pair of items that are
 * not all of one scalar type, so a caller's 16,000 small objects against a schema that merely says
 * `uniqueItems: true` (a common keyword) held the main thread 16 s, and a 4 MiB array hours. Each
 * item is keyed by its canonical JSON (key order does not matter, as JSON Schema's equality says).
 */
function linearUniqueItems(ajv: Ajv): void {
  ajv.removeKeyword("uniqueItems");
  const unique: SchemaValidateFunction = (schema: boolean, data: unknown[]) => {
    if (!schema) return true;
    const seen = new Map<string, number>();
    for (let i = 0; i < data.length; i++) {
      const key = canonicalJson(data[i]);
      const first = seen.get(key);
      if (first !== undefined) {
        unique.errors = [{
          keyword: "uniqueItems",
          message: `must NOT have duplicate items (items ## ${first} and ${i} are identical)`,
          params: { i, j: first },
        }];
        return false;
      }
      seen.set(key, i);
    }
    return true;
  };
  ajv.addKeyword({
    keyword: "uniqueItems",
    type: "array",
    schemaType: "boolean",
    validate: unique,
  });
}

/**
 * Generated code the compiled validators may hold in all (ajv's source text; the heap they take
 * is ~8 times it): a 59 KB schema of 1,500 properties compiles to ~1 MB of code and 7.6 MB of
 * heap, so an upstream listing hundreds of those could otherwise exhaust memory as they are called.
 */
export const MAX_COMPILED_CODE = 32 * 1024 * 1024;
const MAX_CACHED = 5_000;

/** A cached validator; `validator` is dropped when the cache evicts it (compiled again if used). */
interface Compiled {
  readonly text: string;
  validator: Validator | undefined;
  codeBytes: number;
  /** Used since the eviction sweep last passed it (a second chance before it goes). */
  used: boolean;
  /** Forgets ajv's own references to the compiled schema. */
  release: () => void;
}

// By schema identity and by content, so descriptors re-fetched from an upstream after
// list_changed do not recompile; oldest first, for eviction.
const byObject = new WeakMap<object, Compiled>();
const byText = new Map<string, Compiled>();
let cachedCode = 0;
let codeBudget = MAX_COMPILED_CODE;

/** Sets the code budget (tests: to see eviction without compiling 32 MB); returns the undo. */
export function limitCompiledCode(bytes: number): () => void {
  const before = codeBudget;
  codeBudget = bytes;
  evict();
  return () => {
    codeBudget = before;
  };
}

/**
 * Generated code one upstream's schemas may have compiled over the process's life. V8 keeps the
 * source of every distinct function compiled (its compilation cache: ~2 bytes of heap per byte
 * of code, measured never freed), so an upstream that kept listing new tools with large schemas,
 * each called once, would grow the heap without end. A real upstream's schemas are compiled once
 * each (a changed one is quarantined as a rug pull): 16 MB is ~2,000 typical tools.
 */
export const MAX_CODE_PER_UPSTREAM = 16 * 1024 * 1024;
const compiledFor = new Map<string, number>();

/** Counts `bytes` of generated code against `upstream`'s budget. */
function charge(upstream: string | undefined, bytes: number): void {
  if (upstream !== undefined) compiledFor.set(upstream, (compiledFor.get(upstream) ?? 0) + bytes);
}

/**
 * Compiles a schema (cached), counting the code against `upstream` when an upstream wrote it;
 * throws TypeError naming the problem when it is not valid JSON Schema, or when that upstream has
 * had `maxCode` bytes of code compiled (MCP_MAX_SCHEMA_CODE_PER_UPSTREAM).
 */
export function compileSchema(
  schema: Record<string, unknown>,
  upstream?: string,
  maxCode = MAX_CODE_PER_UPSTREAM,
): Validator {
  let entry = byObject.get(schema);
  if (entry?.validator) {
    entry.used = true;
    return entry.validator;
  }
  const text = entry?.text ?? JSON.stringify(schema);
  entry = byText.get(text);
  if (entry?.validator) {
    entry.used = true;
    byObject.set(schema, entry);
    return entry.validator;
  }
  const spent = upstream === undefined ? 0 : compiledFor.get(upstream) ?? 0;
  if (upstream !== undefined && spent >= maxCode) {
    throw new TypeError(
      `upstream "${upstream}" has had ${(spent / 1e6).toFixed(1)} MB of validation code ` +
        "compiled for its schemas, the most the gateway compiles for one upstream " +
        "(MCP_MAX_SCHEMA_CODE_PER_UPSTREAM; it keeps what it compiled for its life), so no new " +
        "schema of it is compiled: check why it keeps listing new tools, and restart the gateway " +
        "once it is fixed",
    );
  }
  // New, it starts unmarked, as the newest: a sweep reaches it last, after those in use.
  const fresh = compileEntry(schema, text, upstream);
  charge(upstream, fresh.codeBytes);
  const validator = fresh.validator!;
  byText.set(text, fresh);
  byObject.set(schema, fresh);
  cachedCode += fresh.codeBytes;
  evict();
  return validator;
}

/** The cache entry of a schema not compiled yet: the first-error instance now, all errors later. */
function compileEntry(
  schema: Record<string, unknown>,
  text: string,
  upstream: string | undefined,
): Compiled {
  const draft = String(schema.$schema ?? "").includes("2020-12") ? draft2020 : draft07;
  // A copy without $id: two upstreams may reuse an $id for different schemas.
  const { $id: _id, ...rest } = schema;
  const first = compiled(draft.first, rest);
  const cost = new SchemaCost(rest);
  // Compiled when first needed: most calls are valid, and most failing ones are small.
  let all: ValidateFunction | undefined;
  const entry: Compiled = {
    text,
    validator: (value, maxWork = MAX_SCHEMA_WORK) => {
      if (cost.work(value, maxWork) > maxWork) return tooCostly(cost, maxWork);
      if (first(value)) return { valid: true };
      if (countValues(value, MAX_VALUES_FOR_ALL_ERRORS + 1) > MAX_VALUES_FOR_ALL_ERRORS) {
        return { valid: false, errors: [...describe(first.errors), ...LARGE_ARGUMENTS] };
      }
      if (all === undefined) {
        all = compiled(draft.all, rest);
        const bytes = all.toString().length;
        entry.codeBytes += bytes;
        charge(upstream, bytes);
        if (entry.validator !== undefined) {
          cachedCode += bytes;
          evict();
        }
      }
      return all(value) ? { valid: true } : { valid: false, errors: describe(all.errors) };
    },
    codeBytes: first.toString().length,
    used: false,
    release: () => {
      draft.first.removeSchema(rest);
      if (all !== undefined) draft.all.removeSchema(rest);
    },
  };
  return entry;
}

/**
 * Drops the oldest validators unused since the last sweep until the cache is within its bounds
 * (a used one is passed over once, its mark cleared); the newest always stays.
 */
function evict(): void {
  while ((cachedCode > codeBudget || byText.size > MAX_CACHED) && byText.size > 1) {
    const [text, oldest] = byText.entries().next().value!;
    byText.delete(text);
    if (oldest.used) {
      oldest.used = false;
      byText.set(text, oldest);
      continue;
    }
    oldest.validator = undefined;
    oldest.release();
    cachedCode -= oldest.codeBytes;
  }
}

/** What the cache holds now: entries and generated code (tests read it). */
export function compiledSchemas(): { entries: number; codeBytes: number } {
  return { entries: byText.size, codeBytes: cachedCode };
}

/** The refusal of arguments whose check could cost more than `maxWork`, saying which side to fix. */
function tooCostly(cost: SchemaCost, maxWork: number): ValidationResult {
  const limit = `${maxWork.toLocaleString("en-US")} units of work (MCP_MAX_SCHEMA_WORK)`;
  if (cost.perValue > maxWork) {
    return {
      valid: false,
      errors: [
        `(arguments) cannot be checked: the schema costs more than ${limit} for any value, ` +
        "since it applies subschemas that multiply ($refs or allOf/anyOf/oneOf naming the same " +
        "definition more than once at each level); it must be simplified before this tool can be " +
        "called",
      ],
    };
  }
  return {
    valid: false,
    errors: [
      `(arguments) were not checked: against this schema they would take more than ${limit}, ` +
      "so long that every other call would wait; send smaller arguments (fewer items, shorter " +
      "texts), or, if the schema is trusted, raise MCP_MAX_SCHEMA_WORK",
    ],
  };
}

/** The line that says only the first problem of large arguments is reported. */
const LARGE_ARGUMENTS = [
  `(arguments of more than ${MAX_VALUES_FOR_ALL_ERRORS} values are checked up to their first ` +
  "problem)",
];

function compiled(ajv: Ajv, schema: Record<string, unknown>): ValidateFunction {
  try {
    return ajv.compile(schema);
  } catch (error) {
    throw new TypeError(`not a valid JSON Schema: ${(error as Error).message}`);
  }
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
