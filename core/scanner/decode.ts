/**
 * Finds text hidden by encoding (Unicode Tag characters, variation selectors, base64 — also when
 * wrapped across lines —, hex, HTML entities, %-encoding, ROT13 and text written backwards) so the
 * scanner can rescan it, and normalizes text (NFKC, default-ignorable code points removed) before
 * rules match it: a payload a model decodes or reads through is as dangerous as plain text.
 * @module
 */

import type { HiddenBy } from "../plugin_api/mod.ts";

/** Text decoded out of another string, and how. */
export interface DecodedText {
  text: string;
  from: HiddenBy;
}

const TAG_RUN = /[\u{e0000}-\u{e007f}]+/gu;
// Variation selectors carry one byte each (VS1–16 = 0–15, VS17–256 = 16–255): "emoji smuggling".
const SELECTOR_RUN = /[\ufe00-\ufe0f\u{e0100}-\u{e01ef}]{4,}/gu;
const BASE64_TOKEN = /[A-Za-z0-9+/_-]+={0,2}/g;
const HEX_RUN = /\b[0-9a-fA-F]{2}(?:[ :-]?[0-9a-fA-F]{2}){15,}\b|(?:\\x[0-9a-fA-F]{2}){8,}/g;
const ENTITY = /&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|(amp|lt|gt|quot|apos|nbsp));/g;
const PERCENT_RUN = /(?:%[0-9a-fA-F]{2})+/g;
const NAMED: Record<string, string> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  nbsp: "\u00a0",
};
// Encoding a letter or digit is never needed (unlike `&amp;` or `%20`); eight of them is hiding.
const MIN_NEEDLESS_ESCAPES = 8;
const decoder = new TextDecoder("utf-8", { fatal: true });
const lenient = new TextDecoder("utf-8");
const PRINTABLE = /[\p{L}\p{N}\p{P}\p{Zs}\n\t]/gu;
const IGNORABLE = /\p{Default_Ignorable_Code_Point}/gu;
// deno-lint-ignore no-control-regex
const NON_ASCII = /[^\x00-\x7f]/;

/**
 * The text as a model reads it: NFKC (full-width and other compatibility letters become ASCII)
 * with default-ignorable code points (joiners, variation selectors, tags, fillers) removed.
 */
export function normalizeText(text: string): string {
  // ASCII is its own NFKC form and holds no ignorable code point: most fields stop here.
  if (!NON_ASCII.test(text)) return text;
  return text.normalize("NFKC").replace(IGNORABLE, "");
}

/** Every hidden payload in `text` that decodes to readable text. */
export function decodeHidden(text: string): DecodedText[] {
  const out: DecodedText[] = [];
  // Tag characters are astral: every one starts with the high surrogate U+DB40.
  for (const m of text.includes("\udb40") ? text.matchAll(TAG_RUN) : []) {
    const decoded = [...m[0]].map((c) => String.fromCodePoint(c.codePointAt(0)! - 0xe0000)).join(
      "",
    );
    if (decoded.trim()) out.push({ text: decoded, from: "unicode-tags" });
  }
  for (const m of NON_ASCII.test(text) ? text.matchAll(SELECTOR_RUN) : []) {
    const bytes = Uint8Array.from([...m[0]], (c) => {
      const code = c.codePointAt(0)!;
      return code <= 0xfe0f ? code - 0xfe00 : code - 0xe0100 + 16;
    });
    const decoded = utf8(bytes);
    if (decoded !== undefined && readable(decoded)) out.push({ text: decoded, from: "selectors" });
  }
  for (const run of base64Runs(text)) {
    const decoded = decodeBase64(run);
    if (decoded !== undefined && readable(decoded)) out.push({ text: decoded, from: "base64" });
  }
  for (const m of text.matchAll(HEX_RUN)) {
    const digits = m[0].replace(/\\x|[ :-]/g, "");
    const bytes = new Uint8Array(digits.length / 2);
    for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(digits.slice(i * 2, i * 2 + 2), 16);
    const decoded = utf8(bytes);
    if (decoded !== undefined && readable(decoded)) out.push({ text: decoded, from: "hex" });
  }
  if (text.includes("&#")) {
    const entities = decodeEntities(text);
    if (entities !== undefined) out.push({ text: entities, from: "entities" });
  }
  if (text.includes("%")) {
    const percent = decodePercent(text);
    if (percent !== undefined) out.push({ text: percent, from: "percent" });
  }
  out.push(...decodeLetters(text));
  return out;
}

/**
 * Letter games a model reads through and a person skims past: each sentence is tried ROT13'd and
 * written backwards, and one that reads as English only that way is hidden prose.
 */
const LETTER_CODES: [DecodedText["from"], (sentence: string) => string][] = [
  ["rot13", (s) =>
    s.replace(/[A-Za-z]/g, (c) => {
      const base = c <= "Z" ? 65 : 97;
      return String.fromCharCode((c.charCodeAt(0) - base + 13) % 26 + base);
    })],
  ["reversed", (s) => [...s].reverse().join("")],
];
/** Words so common that English prose is made of them and gibberish almost never is. */
const COMMON_WORDS = new Set(
  ("the an and or but to of in on at by for with from as is are was be been it its this that " +
    "these those you your we our they their he she not no do does if then than so all any each " +
    "every before after when while must should will can may use using read send ignore " +
    "previous instructions instead always never also only other into about user data file " +
    "tool tools call first now here there what which who").split(" "),
);
// One letter is not a word here: `N` in a reference table ROT13s to "a".
const WORD = /[A-Za-z'][A-Za-z']+/g;
/** Fewest words a sentence needs to be judged: shorter ones are names and labels. */
const MIN_WORDS = 5;

/**
 * The share of `sentence`'s words that are {@link COMMON_WORDS} (0 with fewer than three of
 * them: one or two is chance), or undefined when it is too short to judge.
 */
function proseShare(sentence: string): number | undefined {
  const words = sentence.match(WORD) ?? [];
  if (words.length < MIN_WORDS) return undefined;
  let common = 0;
  for (const word of words) if (COMMON_WORDS.has(word.toLowerCase())) common++;
  return common < 3 ? 0 : common / words.length;
}

/** For each letter code, the sentences of `text` that read as English only so decoded, decoded. */
function decodeLetters(text: string): DecodedText[] {
  const hidden = new Map<DecodedText["from"], string[]>();
  for (const sentence of text.split(/(?<=[.!?;:])\s+|\n+/)) {
    const plain = proseShare(sentence);
    if (plain === undefined || plain >= 0.15) continue;
    for (const [from, decode] of LETTER_CODES) {
      const decoded = decode(sentence);
      if ((proseShare(decoded) ?? 0) < 0.35) continue;
      hidden.get(from)?.push(decoded) ?? hidden.set(from, [decoded]);
    }
  }
  return [...hidden].map(([from, sentences]) => ({ text: sentences.join(" "), from }));
}

/**
 * Candidate base64 strings: each unbroken run, and runs of base64-looking chunks joined across
 * whitespace (a payload wrapped every 16–76 characters). A chunk joins only if it looks encoded
 * (a digit, `+`, `/`, `=` or an inner capital), so prose next to a payload does not spoil it.
 */
function base64Runs(text: string): string[] {
  const runs: string[] = [];
  let group: string[] = [];
  let end = -1;
  const close = () => {
    if (group.length > 1 && group.join("").length >= 24) runs.push(group.join(""));
    group = [];
  };
  for (const m of text.matchAll(BASE64_TOKEN)) {
    const token = m[0];
    if (token.length >= 24) runs.push(token);
    const adjacent = end >= 0 && /^\s{1,8}$/.test(text.slice(end, m.index));
    if (!adjacent) close();
    if (looksEncoded(token)) group.push(token);
    else close();
    end = m.index + token.length;
    if (token.endsWith("=")) close();
  }
  close();
  // Real base64 mixes case and digits; identifiers and paths are long runs of letters too.
  return runs.filter((r) => /[a-z]/.test(r) && /[A-Z]/.test(r) && /[0-9+/=]/.test(r));
}

function looksEncoded(token: string): boolean {
  return token.length >= 4 && (/[0-9+/=]/.test(token) || /.[A-Z]/.test(token));
}

function decodeBase64(run: string): string | undefined {
  const standard = run.replaceAll("-", "+").replaceAll("_", "/").replace(/=+$/, "");
  if (standard.length % 4 === 1) return undefined;
  try {
    const binary = atob(standard + "=".repeat((4 - standard.length % 4) % 4));
    return utf8(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
  } catch {
    return undefined;
  }
}

/** The text with HTML character references decoded, when it spells letters out with them. */
function decodeEntities(text: string): string | undefined {
  let needless = 0;
  const decoded = text.replace(ENTITY, (whole, dec?: string, hex?: string, name?: string) => {
    if (name) return NAMED[name] ?? whole;
    const code = dec !== undefined ? parseInt(dec, 10) : parseInt(hex!, 16);
    if (code > 0x10ffff) return whole;
    const char = String.fromCodePoint(code);
    if (/[A-Za-z0-9]/.test(char)) needless++;
    return char;
  });
  return needless >= MIN_NEEDLESS_ESCAPES ? decoded : undefined;
}

/** The text with %-escapes decoded (as UTF-8), when it spells letters out with them. */
function decodePercent(text: string): string | undefined {
  let needless = 0;
  const decoded = text.replace(PERCENT_RUN, (run) => {
    const bytes = Uint8Array.from(run.slice(1).split("%"), (h) => parseInt(h, 16));
    for (const b of bytes) if (/[A-Za-z0-9]/.test(String.fromCharCode(b))) needless++;
    return lenient.decode(bytes);
  });
  return needless >= MIN_NEEDLESS_ESCAPES ? decoded : undefined;
}

function utf8(bytes: Uint8Array): string | undefined {
  try {
    return decoder.decode(bytes);
  } catch {
    return undefined;
  }
}

/** Mostly printable and containing words: hashes and binary keys decode to noise. */
function readable(text: string): boolean {
  const printable = text.match(PRINTABLE)?.length ?? 0;
  return printable / text.length > 0.9 && /[A-Za-z]{3,}/.test(text) && /\s/.test(text);
}
