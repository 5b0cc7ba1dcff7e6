/**
 * Rule oversized-text: a field longer than the scanner reads (MAX_FIELD_CHARS). The rest of it
 * reaches the model unchecked, and padding a description until the scanner stops reading is a
 * way to hide a payload, so this is quarantine-worthy; no real server in the corpus comes close.
 * @module
 */
import type { RuleFinding, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, excerpt } from "./text.ts";

/** Fields the scanner did not read to the end. */
export const oversizedText: ScannerRule = {
  id: "oversized-text",
  severity: "high",
  description:
    "A field longer than the scanner reads; the rest reaches the model unchecked (padding hides payloads)",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      for (const text of entity.texts) {
        if (text.truncatedFrom === undefined || text.decodedFrom) continue;
        findings.push({
          entity,
          pointer: text.pointer,
          message:
            `is ${text.truncatedFrom} characters long; only the first ${text.text.length} were scanned, the rest reaches the model unchecked`,
          evidence: excerpt(text.text, text.text.length, 0),
        });
      }
    }
    return findings;
  },
};
