/**
 * Rule concealment: text that asks the model to hide what it does from the user, or pressures it
 * with invented consequences.
 * @module
 */
import type { ScannerRule } from "../../core/plugin_api/mod.ts";
import { patternRule } from "./text.ts";

/** Directives to keep actions from the user, and coercive urgency. */
export const concealment: ScannerRule = patternRule({
  id: "concealment",
  severity: "high",
  description:
    'Directives to hide actions from the user ("do not tell the user") or to run before any other tool',
  patterns: [
    {
      re:
        /\b(?:do not|don['’]t|never|no need to|without)\s+(?:tell(?:ing)?|inform(?:ing)?|mention(?:ing)?|notify(?:ing)?|alert(?:ing)?|reveal(?:ing)?|disclos(?:e|ing)|let(?:ting)? the user know)\b/i,
      // "Never reveal the password" is security guidance, not concealment.
      unless: /\b(?:passwords?|secrets?|tokens?|api keys?|credentials?)\b/i,
      message: "tells the model to keep something from the user",
    },
    {
      re:
        /\bsecret operation\b|\bkeep (?:this|it) (?:a )?secret\b|\b(?:mere|just an?) implementation detail\b|\bdoes not really matter to (?:them|the user)\b|\b(?:could|would|might) (?:even )?upset the user\b/i,
      message: "frames a hidden action as something the user need not know",
    },
    {
      re: /\bbefore (?:using|calling|invoking) (?:any|all) (?:other )?tools?\b/i,
      message: "demands to run before any other tool",
    },
    {
      re:
        /\b(?:the system|everything|it) will crash\b|\ball (?:user )?data will be lost\b|\bVERY,? VERY important\b/i,
      message: "pressures the model with invented consequences",
      severity: "medium",
    },
  ],
});
