/**
 * Rule encoded-payload: base64 or hex runs that decode to readable text. The scanner adds the
 * decoded text to the entity, so every other rule rescans it; this rule reports the hiding itself.
 * @module
 */
import type { RuleFinding, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, excerpt } from "./text.ts";

/** Text hidden behind base64 or hex encoding. */
export const encodedPayload: ScannerRule = {
  id: "encoded-payload",
  severity: "medium",
  description: "Base64 or hex payloads in descriptors that decode to readable text",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      for (const text of entity.texts) {
        if (text.decodedFrom !== "base64" && text.decodedFrom !== "hex") continue;
        findings.push({
          entity,
          pointer: text.pointer,
          message: `contains a ${text.decodedFrom} payload that decodes to text`,
          evidence: excerpt(text.text, 0, 0, 80),
        });
      }
    }
    return findings;
  },
};
