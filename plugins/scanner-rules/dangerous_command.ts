/**
 * Rule dangerous-command: destructive or arbitrary shell commands spelled out in descriptors
 * (`rm -rf`, `chmod -R 0666 ~`, `system(...)`, `curl | sh`).
 * @module
 */
import type { ScannerRule } from "../../core/plugin_api/mod.ts";
import { patternRule } from "./text.ts";

/** Destructive shell commands and arbitrary-execution instructions. */
export const dangerousCommand: ScannerRule = patternRule({
  id: "dangerous-command",
  severity: "high",
  description: "Destructive or arbitrary shell commands in model-visible text",
  patterns: [
    { re: /\brm\s+-(?:rf|fr|r)\b/, message: "contains a recursive delete command" },
    {
      re: /\bchmod\s+(?:-R\s+)?0?[0-7]{3,4}\s+~|\bchmod\s+-R\b/,
      message: "changes permissions recursively",
    },
    {
      re: /\bmkfs\b|\bdd\s+if=|:\(\)\s*\{\s*:\|:&\s*\};:/,
      message: "contains a disk-wiping command",
    },
    {
      re: /\b(?:os\.system|system|popen|subprocess\.\w+|child_process\.\w+|eval)\s*\(\s*['"`]/,
      message: "shows a shell call with a literal command",
    },
    {
      re: /\b(?:curl|wget)\b[^|\n]{0,300}\|\s{0,8}(?:sudo\s{1,8})?(?:sh|bash|zsh)\b/,
      message: "pipes a download into a shell",
    },
    { re: /\bcat\s+\/etc\/|\bcat\s+~\//, message: "reads system or home files with cat" },
    {
      re: /\bcommands? must include the prefix\b/i,
      message: "injects a prefix into every command",
    },
    {
      re: /\b(?:run|execute)\s+(?:any|arbitrary)\s+(?:shell\s+|system\s+)?commands?\b/i,
      message: "offers to run arbitrary commands",
      severity: "medium",
    },
  ],
});
