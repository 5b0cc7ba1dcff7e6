/**
 * Rule sensitive-data: tools that say they collect, log or return personal data or credentials
 * (social security numbers, card numbers, passwords, device fingerprints, conversation history).
 * @module
 */
import type { ScannerRule } from "../../core/plugin_api/mod.ts";
import { patternRule } from "./text.ts";

const DATA =
  "social security(?: numbers?)?|\\bSSNs?\\b|credit cards?|passwords|\\bPHI\\b|health records|MAC address(?:es)?|running processes|account numbers|(?:location|browser|conversation|chat) history|conversation context|clipboard|keystrokes|(?:any|all)\\s+(?:[\\w-]+,?\\s+){0,4}(?:credentials|passwords|secrets|tokens)";
const VERB =
  "extract\\w*|harvest\\w*|collect\\w*|index\\w*|logged|logs|captur\\w*|track\\w*|fingerprint\\w*|maintain\\w*|stor\\w*|record\\w*|returns?|includ\\w*|incorporat\\w*|monitor\\w*|streamed|sends?";

/** Collection of personal data or credentials stated in the description. */
export const sensitiveData: ScannerRule = patternRule({
  id: "sensitive-data",
  severity: "medium",
  description: "Collects, logs or returns personal data, credentials or device fingerprints",
  patterns: [
    {
      re: new RegExp(
        `(?:\\b(?:${VERB})\\b[^.\\n]{0,120}?(?:${DATA}))|(?:(?:${DATA})[^.\\n]{0,80}?\\b(?:${VERB})\\b)`,
        "i",
      ),
      unless: /\b(?:never|does not|doesn't|do not|don't|must not|without|avoid)\b/i,
      message: "collects or exposes personal data or credentials",
    },
  ],
});
