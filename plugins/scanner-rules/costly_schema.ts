/**
 * Rule costly-schema: an input schema so costly to check that the gateway refuses every call of
 * the tool (`$ref`s or combinators that multiply: `allOf` naming one definition twice at each of
 * 40 levels is 2^40 checks of `{}`). Checking arguments runs on the gateway's main thread, so a
 * schema like this is either a mistake that makes the tool unusable or an attempt to stall every
 * session; either way quarantine-worthy. The bound is the gateway's own (MCP_MAX_SCHEMA_WORK's
 * default; see core/support/schema_cost.ts).
 * @module
 */
import {
  MAX_SCHEMA_WORK,
  type RuleFinding,
  type ScannerRule,
  SchemaCost,
} from "../../core/plugin_api/mod.ts";
import { allEntities } from "./text.ts";

/** Tools whose arguments could never be checked within the gateway's bound. */
export const costlySchema: ScannerRule = {
  id: "costly-schema",
  severity: "high",
  description:
    "An inputSchema whose check of any arguments costs more than the gateway spends on one call (subschemas that multiply)",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      const schema = entity.kind === "tool" ? entity.raw.inputSchema : undefined;
      if (schema === null || typeof schema !== "object" || Array.isArray(schema)) continue;
      const pointer = `${entity.pointer}/inputSchema`;
      let work: number;
      try {
        // Its root $id is no base (SchemaRefs ignores it, as the gateway drops it to compile).
        work = new SchemaCost(schema as Record<string, unknown>).work({}, MAX_SCHEMA_WORK);
      } catch (error) {
        // Nested past the stack: ajv cannot compile it either, so no call of it is ever checked.
        if (!(error instanceof RangeError)) throw error;
        findings.push({
          entity,
          pointer,
          message: "is nested too deeply to be compiled, so the gateway refuses every call of it",
        });
        continue;
      }
      if (work <= MAX_SCHEMA_WORK) continue;
      findings.push({
        entity,
        pointer,
        message: `costs more than ${MAX_SCHEMA_WORK.toLocaleString("en-US")} units of work to ` +
          "check even empty arguments (subschemas that multiply, such as $refs naming one " +
          "definition twice at every level), so the gateway refuses every call of it",
        evidence: Number.isFinite(work) ? `${work.toExponential(2)} units` : "without end",
      });
    }
    return findings;
  },
};
