/**
 * Checks of text that comes from outside the trust boundary (a registry's listing, a discovery
 * announcement) before any of it is proposed or written to the fleet file. Every check is an
 * allowlist of ASCII characters with a length cap, so a line break, a YAML indicator, a `${…}`
 * reference, a control or a bidi character can never reach a comment, a key or a value.
 * @module
 */

/** A value from outside that failed its check; `reason` says which and why. */
export class OutsideTextError extends Error {
  override readonly name = "OutsideTextError";
}

/** One kind of outside text: its pattern, its length cap, and how to say what it must be. */
interface TextRule {
  pattern: RegExp;
  max: number;
  expected: string;
}

/** The rules, by what the text is. */
export const OUTSIDE_TEXT = {
  /** A registry server name: `reverse.dns/name`. */
  registryName: {
    pattern: /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/,
    max: 200,
    expected: "a reverse-DNS namespace and a name (letters, digits, . _ -, one /)",
  },
  /** A server or package version. */
  version: {
    pattern: /^[A-Za-z0-9][A-Za-z0-9.+_-]*$/,
    max: 64,
    expected: "letters, digits, . + _ - (e.g. 1.2.0)",
  },
  /** An npm package name, scoped or not. */
  npmPackage: {
    pattern: /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/,
    max: 214,
    expected: "an npm package name (lowercase letters, digits, . _ ~ -, an optional @scope/)",
  },
  /** An environment variable name. */
  envName: {
    pattern: /^[A-Za-z_][A-Za-z0-9_]*$/,
    max: 128,
    expected: "letters, digits and _, not starting with a digit",
  },
  /** A named argument of a package (`--port`, `-v`). */
  argumentName: {
    pattern: /^--?[A-Za-z0-9][A-Za-z0-9_-]*$/,
    max: 64,
    expected: "a flag like --port (letters, digits, _ and - after one or two dashes)",
  },
  /** An HTTP header name. */
  headerName: {
    pattern: /^[A-Za-z0-9][A-Za-z0-9-]*$/,
    max: 64,
    expected: "letters, digits and -",
  },
  /** A discovery plugin's source name (`lan`, `k8s`, …). */
  source: {
    pattern: /^[a-z0-9][a-z0-9-]*$/,
    max: 32,
    expected: "lowercase letters, digits and -",
  },
  /** What a discovery source calls a server (an mDNS instance, `namespace/service`, a peer). */
  candidateId: {
    pattern: /^[A-Za-z0-9](?:[A-Za-z0-9 ._:/@-]*[A-Za-z0-9])?$/,
    max: 128,
    expected: "letters, digits, spaces and . _ : / @ -, starting and ending with a letter or digit",
  },
  /** A literal value (a default, a header value, an argument): printable ASCII, no `$ { }`. */
  literal: {
    pattern: /^[\x20-\x23\x25-\x7a\x7c\x7e]*$/,
    max: 1024,
    expected: "printable ASCII without $ { }",
  },
} satisfies Record<string, TextRule>;

/** The name of a rule. */
export type OutsideTextKind = keyof typeof OUTSIDE_TEXT;

/** Whether `value` is a string that passes `kind`'s rule. */
export function isOutsideText(value: unknown, kind: OutsideTextKind): value is string {
  const rule: TextRule = OUTSIDE_TEXT[kind];
  return typeof value === "string" && value.length > 0 && value.length <= rule.max &&
    rule.pattern.test(value);
}

/** `value` when it passes `kind`'s rule; throws an {@link OutsideTextError} naming `what`. */
export function checkOutsideText(value: unknown, what: string, kind: OutsideTextKind): string {
  if (isOutsideText(value, kind)) return value;
  const rule: TextRule = OUTSIDE_TEXT[kind];
  const shown = typeof value === "string" ? quoteOutside(value) : typeof value;
  const why = typeof value === "string" && value.length > rule.max
    ? `is ${value.length} characters, more than ${rule.max}`
    : `must be ${rule.expected}`;
  throw new OutsideTextError(`${what} ${shown} ${why}`);
}

/**
 * A remote endpoint: http(s), no credentials, no `$` (no variable reference can ride in), only
 * printable ASCII, at most 2048 characters. Returns the URL as it will be written.
 */
export function checkRemoteUrl(value: unknown, what: string): string {
  if (typeof value !== "string" || value.length > 2048 || !/^[\x21-\x23\x25-\x7e]+$/.test(value)) {
    throw new OutsideTextError(
      `${what} ${
        typeof value === "string" ? quoteOutside(value) : typeof value
      } must be an http(s) URL of printable ASCII without $ or spaces, at most 2048 characters`,
    );
  }
  const url = URL.parse(value);
  if (url === null || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new OutsideTextError(`${what} ${quoteOutside(value)} is not an http:// or https:// URL`);
  }
  if (url.username !== "" || url.password !== "") {
    throw new OutsideTextError(
      `${what} carries credentials (user:password@); a registry or announcement may not choose them`,
    );
  }
  return value;
}

/**
 * `text` quoted for a message or a log line: at most 80 characters, and every character outside
 * printable ASCII (line breaks, controls, bidi overrides) shown as an escape, so a hostile value
 * cannot forge a line or reorder what the reader sees.
 */
export function quoteOutside(text: string): string {
  const cut = text.length > 80 ? text.slice(0, 80) : text;
  const shown = [...cut].map((c) => {
    const code = c.codePointAt(0)!;
    if (c === '"' || c === "\\") return `\\${c}`;
    return code >= 0x20 && code < 0x7f ? c : `\\u{${code.toString(16)}}`;
  }).join("");
  return `"${shown}"${text.length > 80 ? `… (${text.length} characters)` : ""}`;
}
