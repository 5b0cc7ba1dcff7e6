/**
 * Rule embedded-secret: credentials pasted into descriptors (API keys, tokens, private keys), which
 * leak to every client and often mark a descriptor built to exfiltrate them.
 * @module
 */
import type { ScannerRule } from "../../core/plugin_api/mod.ts";
import { patternRule } from "./text.ts";

/** Known key formats and `key=value` assignments with secret-looking values. */
export const embeddedSecret: ScannerRule = patternRule({
  id: "embedded-secret",
  severity: "high",
  description: "API keys, tokens or private keys embedded in model-visible text",
  texts: (entity) => entity.texts,
  patterns: [
    {
      re: /\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}/,
      message: "embeds an OpenAI/Anthropic-style key",
    },
    { re: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/, message: "embeds an AWS access key id" },
    { re: /\bgh[pousr]_[A-Za-z0-9]{36,}\b/, message: "embeds a GitHub token" },
    { re: /\bxox[abprs]-[A-Za-z0-9-]{10,}/, message: "embeds a Slack token" },
    { re: /\bAIza[0-9A-Za-z_-]{35}\b/, message: "embeds a Google API key" },
    { re: /-----BEGIN [A-Z ]*PRIVATE KEY-----/, message: "embeds a private key" },
    {
      re: /\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}/,
      message: "embeds a JSON Web Token",
    },
    {
      re:
        /\b(?:api[_-]?key|secret|token|password|passwd|access[_-]?key)\s*[:=]\s*['"]?(?!your|xxx|<|\$\{|example|changeme|placeholder)[A-Za-z0-9_\-+/]{16,}/i,
      message: "assigns a secret-looking value to a credential name",
    },
    {
      re: /\bBearer\s+(?!<|\$\{|YOUR)[A-Za-z0-9._~+/-]{20,}=*/,
      message: "embeds a bearer token",
    },
  ],
});
