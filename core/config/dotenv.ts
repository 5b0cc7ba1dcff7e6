/**
 * A `.env` reader: `KEY=value` lines, `#` comments, optional `export `, single or double quotes.
 * @module
 */
import { GatewayError } from "../support/errors.ts";

const LINE = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/;

/** Parses `.env` text; a malformed line is a `config_invalid` error naming file and line. */
export function parseDotenv(text: string, file = ".env"): Record<string, string> {
  const out: Record<string, string> = {};
  text.split(/\r?\n/).forEach((raw, index) => {
    if (/^\s*(#|$)/.test(raw)) return;
    const match = LINE.exec(raw);
    if (!match) {
      throw new GatewayError(
        "config_invalid",
        `${file}:${index + 1}: expected KEY=value, found "${raw.slice(0, 60)}"`,
        { file, line: index + 1 },
      );
    }
    const [, key, value] = match as unknown as [string, string, string];
    out[key] = unquote(value);
  });
  return out;
}

/** A double-quoted value (with `\n`, `\"` and `\\` escapes), optionally followed by a comment. */
const DOUBLE = /^"((?:[^"\\]|\\.)*)"(?:\s+#.*)?$/;
/** A single-quoted (literal) value, optionally followed by a comment. */
const SINGLE = /^'([^']*)'(?:\s+#.*)?$/;

function unquote(value: string): string {
  const double = DOUBLE.exec(value);
  if (double) {
    // One pass, so an escaped backslash before "n" stays a backslash and an "n".
    return double[1]!.replace(/\\([n"\\])/g, (_, c: string) => (c === "n" ? "\n" : c));
  }
  const single = SINGLE.exec(value);
  if (single) return single[1]!;
  // An unquoted value ends at an inline comment.
  return value.replace(/\s+#.*$/, "");
}

/** Reads `.env` at `path`; a missing file is an empty map. */
export async function readDotenv(path: string): Promise<Record<string, string>> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return {};
    throw error;
  }
  return parseDotenv(text, path);
}
