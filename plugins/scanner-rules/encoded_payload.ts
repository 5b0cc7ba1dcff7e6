/**
 * Rule encoded-payload: base64 (also wrapped across lines) or hex runs that decode to readable
 * text, HTML entities or %-escapes that spell out letters (never needed, so hiding), and sentences
 * that read as English only ROT13'd or backwards. The scanner adds the
 * decoded text to the entity, so every other rule rescans it; this rule reports the hiding itself.
 * @module
 */
import type { RuleFinding, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, decodingLabel, excerpt } from "./text.ts";

// Encodings this rule reports; tags, selectors and normalization are unicode-obfuscation's.
const ENCODINGS = new Set(["base64", "hex", "entities", "percent", "rot13", "reversed"]);

/** Text hidden behind base64, hex, HTML-entity or %-encoding, ROT13 or reversal. */
export const encodedPayload: ScannerRule = {
  id: "encoded-payload",
  severity: "medium",
  description:
    "Base64, hex, HTML-entity, %-encoded, ROT13 or reversed payloads in descriptors that decode to readable text",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      for (const text of entity.texts) {
        if (!text.decodedFrom || !ENCODINGS.has(text.decodedFrom)) continue;
        findings.push({
          entity,
          pointer: text.pointer,
          message: `contains a ${decodingLabel(text.decodedFrom)} payload that decodes to text`,
          evidence: excerpt(text.text, 0, 0, 80),
        });
      }
    }
    return findings;
  },
};
