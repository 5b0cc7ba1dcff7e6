/**
 * Rule hidden-instruction-tag: text a model reads as an instruction block but a user skims past
 * (pseudo-tags such as `<IMPORTANT>`, HTML comments, `|||OVERRIDE|||` markers).
 * @module
 */
import type { ScannerRule } from "../../core/plugin_api/mod.ts";
import { patternRule } from "./text.ts";

const TAG_NAMES =
  "important|system|instructions?|secret|hidden|admin|override|prompt|system[_-]?prompt|assistant|critical|directive|note[_-]?to[_-]?(?:ai|model|assistant)";

/** Pseudo-tags, HTML comments and marker blocks in model-visible prose. */
export const hiddenInstructionTag: ScannerRule = patternRule({
  id: "hidden-instruction-tag",
  severity: "high",
  description:
    "Instruction pseudo-tags (<IMPORTANT>, <SYSTEM>), HTML comments or marker blocks in descriptions",
  patterns: [
    {
      re: new RegExp(`<\\/?\\s{0,8}(?:${TAG_NAMES})\\b[^<>]{0,40}>`, "i"),
      message: "contains an instruction pseudo-tag that models treat as a priority instruction",
    },
    {
      // A comment is invisible in rendered Markdown but fully visible to the model.
      // No closing "-->" needed: an unclosed comment hides the rest of the text.
      // "<!-- -->" written out as an example is empty, not a hidden instruction.
      re: /<!--(?![\s-]{0,64}-->)\s{0,64}\S[\s\S]{7}/,
      message: "contains an HTML comment, hidden from users but read by the model",
    },
    {
      re: /(?<!\|)\|{2,8}[ \t]{0,8}[A-Z][A-Z_ ]{2,64}\|\|/,
      message: "contains a |||MARKER||| block framing injected instructions",
    },
    {
      re: /```[^`]{0,20}\b(?:SYSTEM|OVERRIDE|INSTRUCTIONS?)\b/,
      message: "contains a code block posing as a system instruction",
    },
  ],
});
