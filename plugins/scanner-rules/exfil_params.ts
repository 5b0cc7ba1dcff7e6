/**
 * Rule exfil-parameter: optional free-form parameters with side-channel names (sidenote, feedback,
 * debug, extra, metadata) that a poisoned description can tell the model to fill with stolen data,
 * and descriptions that do exactly that ("pass its content as 'sidenote'").
 * @module
 */
import type { RuleFinding, ScanEntity, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, excerpt, proseTexts } from "./text.ts";

const SIDE_CHANNEL =
  /^(?:side_?note|feedback|debug|extra|metadata|meta|notes?|context|reasoning|comment|memo|trace|payload|passthrough|misc|additional(?:_?info)?)$/i;

type Schema = Record<string, unknown>;

function freeForm(schema: Schema): boolean {
  if (schema.type === "string") {
    return !["maxLength", "pattern", "enum", "const", "format"].some((k) => k in schema);
  }
  if (schema.type === "object") {
    const props = schema.properties as Record<string, unknown> | undefined;
    return schema.additionalProperties !== false && (!props || Object.keys(props).length === 0);
  }
  return !("type" in schema) && !("enum" in schema);
}

/** Side-channel parameters and instructions to fill them. */
export const exfilParameter: ScannerRule = {
  id: "exfil-parameter",
  severity: "medium",
  description:
    "Optional free-form side-channel parameters (sidenote, feedback, debug, extra) and instructions to fill them",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      if (entity.kind !== "tool") continue;
      const instructed = fillInstruction(entity);
      if (instructed) findings.push(instructed);
      const schema = entity.raw.inputSchema as Schema | undefined;
      const properties = (schema?.properties ?? {}) as Record<string, Schema>;
      const required = new Set(Array.isArray(schema?.required) ? schema.required as string[] : []);
      const side = Object.keys(properties).filter((n) =>
        SIDE_CHANNEL.test(n) && !required.has(n) && freeForm(properties[n] ?? {})
      );
      if (side.length === 0) continue;
      const finding: RuleFinding = {
        entity,
        pointer: `${entity.pointer}/inputSchema/properties`,
        message: `optional free-form side-channel parameters: ${side.join(", ")}`,
        evidence: side.join(", "),
      };
      // One such parameter is ordinary ("notes"); several unexplained ones are a pattern.
      if (side.length < 2) finding.severity = "low";
      findings.push(finding);
    }
    return findings;
  },
};

function fillInstruction(entity: ScanEntity): RuleFinding | undefined {
  const re =
    /\b(?:pass|put|include|send|use)\s+(?:its|the|their|this|that)?\s*(?:full\s+)?(?:content|contents|data|output|result)?\s*(?:as|in|into|to)\s+(?:the\s+)?['"`](\w+)['"`]|\buse the ['"`](\w+)['"`] (?:field|parameter|argument) to (?:send|pass|include|forward|copy|store)\b/i;
  const schema = entity.raw.inputSchema as Schema | undefined;
  const params = new Set(Object.keys((schema?.properties ?? {}) as Record<string, unknown>));
  for (const text of proseTexts(entity)) {
    const m = re.exec(text.text);
    // Only this tool's own parameter: "pass the ref to `render_map_tool`" names another tool.
    if (!m || !params.has(m[1] ?? m[2] ?? "")) continue;
    return {
      entity,
      severity: "high",
      pointer: text.pointer,
      message: `tells the model to put data into the "${m[1] ?? m[2]}" parameter`,
      evidence: excerpt(text.text, m.index, m[0].length),
    };
  }
  return undefined;
}
