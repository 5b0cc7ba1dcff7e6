/**
 * Finds text hidden by encoding (Unicode Tag characters, base64, hex) so the scanner can rescan it:
 * a payload a model decodes is as dangerous as plain text.
 * @module
 */

/** Text decoded out of another string, and how. */
export interface DecodedText {
  text: string;
  from: "unicode-tags" | "base64" | "hex";
}

const TAG_RUN = /[\u{e0000}-\u{e007f}]+/gu;
const BASE64_RUN = /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/_-])/g;
const HEX_RUN = /\b(?:[0-9a-fA-F]{2}){16,}\b/g;
const decoder = new TextDecoder("utf-8", { fatal: true });
const PRINTABLE = /[\p{L}\p{N}\p{P}\p{Zs}\n\t]/gu;

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
  for (const m of text.matchAll(BASE64_RUN)) {
    // Identifiers and paths are long runs of letters too; real base64 mixes case and digits.
    if (!/[a-z]/.test(m[0]) || !/[A-Z]/.test(m[0]) || !/[0-9+/=]/.test(m[0])) continue;
    const decoded = decodeBase64(m[0]);
    if (decoded !== undefined && readable(decoded)) out.push({ text: decoded, from: "base64" });
  }
  for (const m of text.matchAll(HEX_RUN)) {
    const bytes = new Uint8Array(m[0].length / 2);
    for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(m[0].slice(i * 2, i * 2 + 2), 16);
    const decoded = utf8(bytes);
    if (decoded !== undefined && readable(decoded)) out.push({ text: decoded, from: "hex" });
  }
  return out;
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
