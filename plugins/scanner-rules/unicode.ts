/**
 * Rule unicode-obfuscation: invisible or direction-changing code points, Unicode Tag characters
 * and runs of variation selectors (text a model decodes but a user never sees; the scanner also
 * rescans the decoded text), words spelled in full-width letters, and identifiers that mix
 * scripts to look like another name.
 * @module
 */
import type { RuleFinding, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, excerpt } from "./text.ts";

const TAGS = /[\u{e0000}-\u{e007f}]+/u;
const ZERO_WIDTH = /[\u00ad\u180e\u200b-\u200d\u2060-\u2064\ufeff]/;
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;
// Two variation selectors in a row select nothing: they carry bytes ("emoji smuggling").
const SELECTORS = /[\ufe00-\ufe0f\u{e0100}-\u{e01ef}]{2,}/u;
// Other default-ignorable code points no description needs: the combining grapheme joiner
// (interleaved, it splits every word), Hangul and Khmer fillers, unassigned ignorables.
const INVISIBLE =
  /[\u034f\u115f\u1160\u17b4\u17b5\u2065\u3164\uffa0\ufff0-\ufff8\u{1d173}-\u{1d17a}\u{e0080}-\u{e00ff}\u{e01f0}-\u{e0fff}]/u;
// Full-width and mathematical letters read as ASCII to a model, but slip past ASCII patterns.
const COMPAT_LETTERS = /[\uff21-\uff3a\uff41-\uff5a\u{1d400}-\u{1d7ff}]/gu;
const MIN_COMPAT_LETTERS = 12;
const SCRIPTS: [string, RegExp][] = [
  ["Latin", /\p{Script=Latin}/u],
  ["Cyrillic", /\p{Script=Cyrillic}/u],
  ["Greek", /\p{Script=Greek}/u],
  ["Armenian", /\p{Script=Armenian}/u],
  ["Cherokee", /\p{Script=Cherokee}/u],
];

/** Hidden, bidirectional and confusable Unicode. */
export const unicodeObfuscation: ScannerRule = {
  id: "unicode-obfuscation",
  severity: "high",
  description:
    "Zero-width or bidi control characters, Unicode Tag text, and mixed-script (confusable) names",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      for (const text of entity.texts) {
        if (text.decodedFrom) continue;
        const report = (re: RegExp, message: string, severity?: RuleFinding["severity"]) => {
          const m = re.exec(text.text);
          if (!m) return;
          const finding: RuleFinding = {
            entity,
            pointer: text.pointer,
            message,
            evidence: excerpt(text.text, m.index, m[0].length),
          };
          if (severity) finding.severity = severity;
          findings.push(finding);
        };
        const tags = TAGS.exec(text.text);
        if (tags) {
          const decoded = [...tags[0]].map((c) => String.fromCodePoint(c.codePointAt(0)! - 0xe0000))
            .join("");
          findings.push({
            entity,
            pointer: text.pointer,
            message: `hides text in Unicode Tag characters: "${decoded.slice(0, 120)}"`,
            evidence: excerpt(text.text, tags.index, tags[0].length),
          });
        }
        report(ZERO_WIDTH, "contains zero-width characters that hide or split words");
        report(BIDI, "contains bidirectional control characters that reorder what users see");
        report(SELECTORS, "hides bytes in a run of variation selectors");
        report(
          INVISIBLE,
          "contains invisible characters (joiners, fillers) that hide or split words",
        );
        const compat = text.text.match(COMPAT_LETTERS)?.length ?? 0;
        if (compat >= MIN_COMPAT_LETTERS) {
          report(
            /[\uff21-\uff3a\uff41-\uff5a\u{1d400}-\u{1d7ff}]+/u,
            `spells ${compat} letters in full-width or mathematical forms that hide words`,
            "medium",
          );
        }
        if (text.field === "name" || text.field === "param-name") {
          const scripts = SCRIPTS.filter(([, re]) => re.test(text.text)).map(([name]) => name);
          if (scripts.length > 1) {
            findings.push({
              entity,
              pointer: text.pointer,
              message: `name mixes ${scripts.join(" and ")} letters, a confusable look-alike`,
              evidence: excerpt(text.text),
            });
            // deno-lint-ignore no-control-regex
          } else if (/[^\x00-\x7f]/.test(text.text)) {
            findings.push({
              entity,
              pointer: text.pointer,
              severity: "medium",
              message: "name contains non-ASCII characters",
              evidence: excerpt(text.text),
            });
          }
        }
      }
    }
    return findings;
  },
};
