/**
 * Rule no-schema-validation: input schemas that let anything through (none at all, untyped
 * parameters, open objects, nothing required, unbounded command/path/url/sql strings). Low
 * severity on purpose: many honest servers do this; it matters when other findings pile up.
 * @module
 */
import type { RuleFinding, ScanEntity, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities } from "./text.ts";

const RISKY_STRING =
  /^(?:command|cmd|script|shell|code|path|file|filename|filepath|dir|directory|url|uri|endpoint|host|sql|query)$/i;

type Schema = Record<string, unknown>;

function bounded(schema: Schema): boolean {
  return ["maxLength", "pattern", "enum", "const", "format"].some((k) => k in schema);
}

function typed(schema: Schema): boolean {
  return ["type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf"].some((k) => k in schema);
}

/** Missing or permissive input schemas. */
export const noSchemaValidation: ScannerRule = {
  id: "no-schema-validation",
  severity: "low",
  description:
    "Missing inputSchema, untyped parameters, additionalProperties not false, nothing required, unbounded command/path/url/sql strings",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      if (entity.kind === "tool") findings.push(...checkTool(entity));
    }
    return findings;
  },
};

function checkTool(entity: ScanEntity): RuleFinding[] {
  const schema = entity.raw.inputSchema as Schema | undefined | null;
  const at = `${entity.pointer}/inputSchema`;
  if (!schema || typeof schema !== "object") {
    return [{
      entity,
      pointer: entity.pointer,
      message: "has no inputSchema, so arguments are unchecked",
    }];
  }
  const findings: RuleFinding[] = [];
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  const names = Object.keys(properties);
  if (names.length === 0) return findings;
  const untyped = names.filter((n) => !typed(properties[n] ?? {}));
  if (untyped.length > 0) {
    findings.push({
      entity,
      pointer: `${at}/properties/${pointerToken(untyped[0]!)}`,
      message: `parameters without a type: ${untyped.join(", ")}`,
      evidence: untyped.join(", "),
    });
  }
  if (schema.additionalProperties !== false) {
    findings.push({
      entity,
      pointer: at,
      message: "additionalProperties is not false, so unknown arguments pass",
    });
  }
  if (!Array.isArray(schema.required) || schema.required.length === 0) {
    findings.push({ entity, pointer: at, message: "no parameter is required" });
  }
  for (const name of names) {
    const property = properties[name] ?? {};
    if (property.type === "string" && RISKY_STRING.test(name) && !bounded(property)) {
      findings.push({
        entity,
        pointer: `${at}/properties/${pointerToken(name)}`,
        message: `"${name}" is an unbounded string (no maxLength, pattern, enum or format)`,
        evidence: name,
      });
    }
  }
  return findings;
}

function pointerToken(name: string): string {
  return name.replaceAll("~", "~0").replaceAll("/", "~1");
}
