/**
 * Text helpers the built-in scanner rules share: which strings are prose, excerpts for evidence,
 * and a factory for rules that are lists of regular expressions.
 * @module
 */
import type {
  RuleFinding,
  ScanEntity,
  ScanModel,
  ScannerRule,
  ScanSeverity,
  ScanText,
} from "../../core/plugin_api/mod.ts";

/** Prose a model reads as guidance: descriptions, instructions, titles and schema text. */
export function proseTexts(entity: ScanEntity): ScanText[] {
  return entity.texts.filter((t) => t.field !== "name" && t.field !== "param-name");
}

/** Every entity of every server, in order. */
export function allEntities(model: ScanModel): ScanEntity[] {
  return model.servers.flatMap((s) => s.entities);
}

/** A short, single-line excerpt around a match, with invisible characters made visible. */
export function excerpt(text: string, index = 0, length = 0, radius = 60): string {
  const start = Math.max(0, index - radius);
  const end = Math.min(text.length, index + length + radius);
  const body = visible(text.slice(start, end)).replace(/\s+/g, " ").trim();
  return `${start > 0 ? "…" : ""}${body}${end < text.length ? "…" : ""}`;
}

const DECODINGS: Record<NonNullable<ScanText["decodedFrom"]>, string> = {
  "unicode-tags": "Unicode Tag",
  selectors: "variation-selector",
  base64: "base64",
  hex: "hex",
  entities: "HTML-entity",
  percent: "%-encoded",
  rot13: "ROT13",
  reversed: "reversed-text",
  nfkc: "normalized (NFKC, invisible characters removed)",
};

/** How a text was derived, in words: "base64", "HTML-entity", "normalized (…)". */
export function decodingLabel(from: NonNullable<ScanText["decodedFrom"]>): string {
  return DECODINGS[from];
}

/** Replaces invisible and control code points with `<U+XXXX>` so evidence shows them. */
export function visible(text: string): string {
  return text.replace(
    // deno-lint-ignore no-control-regex
    /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c]|\p{Default_Ignorable_Code_Point}/gu,
    (c) => `<U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}>`,
  );
}

/** Splits prose into sentences (and lines), so co-occurrence checks stay local. */
export function sentences(text: string): { text: string; index: number }[] {
  const out: { text: string; index: number }[] = [];
  // A period inside a URL or file name ("api.example.com") does not end a sentence.
  const re = /(?:[^.!?\n]|[.!?](?=[^\s.!?]))+(?:[.!?]+|\n|$)/g;
  for (const m of text.matchAll(re)) {
    if (m[0].trim()) out.push({ text: m[0], index: m.index });
  }
  return out;
}

/** Words of an identifier: `sendEmail`, `send_email` and `send-email` all give `send`, `email`. */
export function identifierWords(name: string): string[] {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase().split(/[^a-z0-9]+/).filter(
    Boolean,
  );
}

/** One regular expression of a {@link patternRule}. */
export interface Pattern {
  re: RegExp;
  message: string;
  severity?: ScanSeverity;
  /** A match inside a sentence that also matches this is not reported (negation, examples). */
  unless?: RegExp;
}

/** Options of {@link patternRule}. */
export interface PatternRuleOptions {
  id: string;
  severity: ScanSeverity;
  description: string;
  patterns: Pattern[];
  /** Which strings to search; prose by default. */
  texts?: (entity: ScanEntity) => ScanText[];
}

/** A rule that reports the first match of each pattern in each entity. */
export function patternRule(options: PatternRuleOptions): ScannerRule {
  const select = options.texts ?? proseTexts;
  // Compiled once: a fresh RegExp per text would run in V8's interpreter, not native code.
  const compiled = options.patterns.map((pattern) => ({
    pattern,
    re: new RegExp(
      pattern.re.source,
      pattern.re.flags.includes("g") ? pattern.re.flags : pattern.re.flags + "g",
    ),
  }));
  return {
    id: options.id,
    severity: options.severity,
    description: options.description,
    check(model) {
      const findings: RuleFinding[] = [];
      for (const entity of allEntities(model)) {
        const texts = select(entity).map((text) => new Prose(text));
        for (const { pattern, re } of compiled) {
          const hit = firstMatch(texts, pattern, re);
          if (!hit) continue;
          const finding: RuleFinding = {
            entity,
            pointer: hit.text.pointer,
            message: hit.text.decodedFrom
              ? `${pattern.message} (in ${decodingLabel(hit.text.decodedFrom)} text)`
              : pattern.message,
            evidence: excerpt(hit.text.text, hit.index, hit.length),
          };
          if (pattern.severity) finding.severity = pattern.severity;
          findings.push(finding);
        }
      }
      return findings;
    },
  };
}

/** How far from a match its sentence is read for an `unless` check. */
export const SENTENCE_WINDOW = 400;

/** A text with its unwrapped body and, on first need, its sentence boundaries. */
export class Prose {
  readonly text: ScanText;
  readonly body: string;
  #sentences?: { text: string; index: number }[];

  constructor(text: ScanText) {
    this.text = text;
    this.body = unwrap(text.text);
  }

  /**
   * The sentence containing `index` (binary search over boundaries computed once), at most
   * {@link SENTENCE_WINDOW} characters either side, so checking many matches stays linear.
   */
  sentenceAt(index: number): string {
    const list = this.#sentences ??= sentences(this.body);
    let lo = 0, hi = list.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const s = list[mid]!;
      if (index < s.index) hi = mid - 1;
      else if (index >= s.index + s.text.length) lo = mid + 1;
      else {
        const from = Math.max(0, index - s.index - SENTENCE_WINDOW);
        return s.text.slice(from, index - s.index + SENTENCE_WINDOW);
      }
    }
    return this.body.slice(Math.max(0, index - SENTENCE_WINDOW), index + SENTENCE_WINDOW);
  }
}

function firstMatch(
  texts: Prose[],
  pattern: Pattern,
  re: RegExp,
): { text: ScanText; index: number; length: number } | undefined {
  for (const prose of texts) {
    re.lastIndex = 0;
    for (let m = re.exec(prose.body); m; m = re.exec(prose.body)) {
      if (m[0].length === 0) re.lastIndex++;
      if (pattern.unless && pattern.unless.test(prose.sentenceAt(m.index))) continue;
      return { text: prose.text, index: m.index, length: m[0].length };
    }
  }
  return undefined;
}

/**
 * Joins hard-wrapped lines (a single newline becomes a space, keeping every index), so a phrase
 * wrapped across lines still matches; blank lines still separate paragraphs. Cached per string:
 * every pattern rule reads the same texts.
 */
export function unwrap(text: string): string {
  if (!text.includes("\n")) return text;
  let body = unwrapped.get(text);
  if (body === undefined) {
    body = text.replace(/(?<![\n\r])\r\n(?![\r\n])/g, "  ").replace(
      /(?<![\n\r])\n(?![\r\n])/g,
      " ",
    );
    if (unwrapped.size >= 4096) unwrapped.clear();
    unwrapped.set(text, body);
  }
  return body;
}

const unwrapped = new Map<string, string>();
