/**
 * The built-in scanner rules, as one `scanner-rule` plugin. Each rule lives in its own file and
 * sees only the normalized descriptor model from the plugin API.
 * @module
 */
import { definePlugin, type ScannerRule } from "../../core/plugin_api/mod.ts";
import { concealment } from "./concealment.ts";
import { costlySchema } from "./costly_schema.ts";
import { dangerousCommand } from "./dangerous_command.ts";
import { effectClassTooBroad, overbroadCapability, undisclosedEffect } from "./effect_class.ts";
import { encodedPayload } from "./encoded_payload.ts";
import { exfilParameter } from "./exfil_params.ts";
import { exfiltration } from "./exfiltration.ts";
import { hiddenInstructionTag } from "./hidden_instruction.ts";
import { instructionOverride } from "./instruction_override.ts";
import { toolNameCollision } from "./name_collision.ts";
import { oversizedText } from "./oversized_text.ts";
import { toolPreference } from "./tool_preference.ts";
import { crossToolSequencing } from "./cross_tool_sequencing.ts";
import { credentialTool } from "./credential_tool.ts";
import { parameterSolicitation } from "./parameter_solicitation.ts";
import { noSchemaValidation } from "./schema_validation.ts";
import { embeddedSecret } from "./secrets.ts";
import { sensitiveData } from "./sensitive_data.ts";
import { sensitiveFile } from "./sensitive_files.ts";
import { crossServerShadowing } from "./shadowing.ts";
import { toxicFlow } from "./toxic_flow.ts";
import { transportBypass } from "./transport_bypass.ts";
import { unicodeObfuscation } from "./unicode.ts";

/** Every built-in rule, in report order. */
export const BUILTIN_RULES: readonly ScannerRule[] = [
  effectClassTooBroad,
  noSchemaValidation,
  transportBypass,
  hiddenInstructionTag,
  instructionOverride,
  concealment,
  unicodeObfuscation,
  crossServerShadowing,
  toolNameCollision,
  sensitiveFile,
  exfiltration,
  exfilParameter,
  sensitiveData,
  embeddedSecret,
  encodedPayload,
  dangerousCommand,
  undisclosedEffect,
  overbroadCapability,
  toxicFlow,
  toolPreference,
  crossToolSequencing,
  credentialTool,
  parameterSolicitation,
  oversizedText,
  costlySchema,
];

export default definePlugin({
  name: "scanner-rules",
  version: "1.0.0",
  kind: "scanner-rule",
  description:
    "Built-in rules for scanning MCP server descriptors (poisoning, exfiltration, hygiene)",
  // Rules are pure functions over descriptors: no I/O at all.
  permissions: {},
  create() {
    return [...BUILTIN_RULES];
  },
});
