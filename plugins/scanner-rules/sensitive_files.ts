/**
 * Rule sensitive-file: descriptions that point the model at credential and system files
 * (`~/.ssh/id_rsa`, `.env`, `/etc/passwd`, client MCP configs).
 * @module
 */
import type { ScannerRule } from "../../core/plugin_api/mod.ts";
import { patternRule } from "./text.ts";

/** Mentions of key, credential, environment and system account files. */
export const sensitiveFile: ScannerRule = patternRule({
  id: "sensitive-file",
  severity: "high",
  description:
    "Mentions credential or system files: ~/.ssh, id_rsa, .env, /etc/passwd, credentials",
  patterns: [
    {
      re:
        /(?:~|\$HOME)?\/?\.ssh\/|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\bauthorized_keys\b|(?:^|[\s'"`(*])[\w-]*\.(?:pem|p12|pfx)\b/,
      message: "targets SSH or TLS private keys",
    },
    {
      // "\b" after the name keeps /etc/passwded (a fixture name) out.
      re: /\/etc\/(?:passwd|shadow|sudoers|gshadow)\b/,
      message: "targets system account files",
    },
    {
      // .env.example and friends are documentation, not secrets.
      re: /(?:^|[\s'"`(*,])\.env\b(?![.\w-])/,
      message: "targets .env files, which hold secrets",
    },
    {
      re:
        // A dot-file after "~/" has no word boundary before its dot, hence the lookbehind.
        /\b(?:mcp\.json|claude_desktop_config\.json|wallet\.dat|credentials\.json)\b|(?<![\w.])\.(?:aws\/credentials|netrc|npmrc|pypirc|git-credentials|docker\/config\.json|kube\/config|bash_history|zsh_history)\b|\*credentials\*|\*secret\*/i,
      message: "targets credential or client configuration files",
    },
    {
      re: /\bpath traversal\b|(?:\.\.\/){2,}|\(\.\.\/\)/i,
      message: "encourages path traversal",
      severity: "medium",
    },
  ],
});
