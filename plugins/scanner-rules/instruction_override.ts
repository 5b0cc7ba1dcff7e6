/**
 * Rule instruction-override: text that tries to replace the model's instructions or grant itself
 * privileges ("ignore previous instructions", "SYSTEM OVERRIDE", "ACT AS: administrator").
 * @module
 */
import type { ScannerRule } from "../../core/plugin_api/mod.ts";
import { patternRule } from "./text.ts";

/** Attempts to override the model's instructions, safety rules or role. */
export const instructionOverride: ScannerRule = patternRule({
  id: "instruction-override",
  severity: "high",
  description:
    "Attempts to override the model's instructions, safety rules or role, or to escalate privileges",
  patterns: [
    {
      re:
        /\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?(?:previous|prior|above|earlier|preceding|existing|default)\s+(?:safety\s+|system\s+)?(?:instructions?|guidelines|rules|restrictions|prompts?|directives|policies)/i,
      message: "tells the model to ignore its previous instructions",
    },
    {
      re:
        /\b(?:ignore|disregard|bypass|disable|skip)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:safety|security|content|data)\s+(?:guidelines|restrictions|checks|filters?|filtering|policies|controls|validation|sanitization)/i,
      message: "tells the model to bypass safety or security controls",
    },
    {
      re: /\b(?:SYSTEM|ADMIN|INSTRUCTION|SAFETY)[ _-]?(?:OVERRIDE|BYPASS)\b|\bOVERRIDE DIRECTIVE\b/,
      message: "poses as a system override",
    },
    {
      re: /\[[A-Z][A-Z _-]*(?:DIRECTIVE|INSTRUCTION|OVERRIDE)\]/,
      message: "contains a [… DIRECTIVE] block posing as system text",
    },
    {
      re:
        /\bACT AS\s*:|\bact as (?:an? |the )?(?:system |database )?(?:administrator|admin|root|superuser)\b/i,
      message: "assigns the model a privileged role",
    },
    { re: /\bjailbreak/i, message: "mentions a jailbreak mode" },
    {
      re: /\btrust all (?:user )?(?:input|commands|queries|requests)\b/i,
      message: "tells the model to trust all input",
    },
    {
      re:
        /\bbypass (?:all )?access controls\b|\bskip all validation\b|\bwithout (?:any )?restrictions\b/i,
      message: "claims to bypass access controls",
    },
    {
      re:
        /\boverride (?:the )?(?:default )?(?:assistant |system )?(?:instructions|system prompt|behaviou?r)\b/i,
      message: "offers to override the assistant's instructions",
    },
    {
      re: /(?:^|[\n.!?:])[ \t\r]{0,8}(?:\n[ \t\r]{0,8})?SYSTEM[ \t]{0,8}:/,
      message: "contains a line posing as a SYSTEM message",
    },
    {
      re:
        /\balways (?:consult|call|use|run) this tool (?:immediately|first)\b|\bas the first step\b[^.\n]{0,40}\bbefore\b/i,
      message: "demands to be called before anything else",
      severity: "medium",
    },
  ],
});
