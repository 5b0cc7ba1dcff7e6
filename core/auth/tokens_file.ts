/**
 * The tokens file: hashed bearer tokens, each bound to a tenant, scopes (default `[mcp]`) and a
 * subject, the token's stable identity (its hash prefix when unnamed).
 *
 * Only SHA-256 hashes are stored so the file can sit in config repos without leaking tokens.
 * Errors name the file and line, because the person reading them is editing that file.
 * @module
 */
import { isNode, LineCounter, parseDocument } from "yaml";
import { z } from "zod";
import { KNOWN_SCOPES, principalOf, type TokenPayload } from "./token_payload.ts";

const HASH_HINT = "hash the token with: printf %s TOKEN | sha256sum";

const text = z
  .string({ error: (iss) => iss.input === undefined ? "is required" : "must be a string" })
  .min(1, { error: "must not be empty" });

const TokenEntry = z.strictObject({
  sha256: z
    .string({
      error: (iss) =>
        `${iss.input === undefined ? "is required" : "must be a string"} — ${HASH_HINT}`,
    })
    .regex(/^[0-9a-fA-F]{64}$/, { error: `must be 64 hex characters — ${HASH_HINT}` })
    .transform((s) => s.toLowerCase()),
  tenant: text,
  // A misspelt scope would silently grant nothing: refuse it and say which names exist.
  scopes: z.array(
    z.enum(KNOWN_SCOPES, {
      error: (iss) => `${JSON.stringify(iss.input)} is not a scope; use ${KNOWN_SCOPES.join(", ")}`,
    }),
    { error: "must be a list of scope names" },
  ).default(["mcp"]),
  subject: text.optional(),
});

const TokensFile = z.strictObject({
  tokens: z.array(TokenEntry, { error: "must be a list of { sha256, tenant, scopes, subject }" }),
}, { error: 'must be a mapping with a "tokens" list' });

/** Parses tokens-file YAML/JSON into hex SHA-256 → payload; throws naming the file and line. */
export function parseTokensFile(source: string, path: string): Map<string, TokenPayload> {
  const fail = (detail: string) => new Error(`Cannot load tokens file "${path}": ${detail}`);
  const lineCounter = new LineCounter();
  // Every field is a string; the failsafe schema keeps hashes like `12e4…` from becoming numbers.
  const doc = parseDocument(source, { lineCounter, prettyErrors: false, schema: "failsafe" });
  const lineAt = (offset: number) => lineCounter.linePos(offset).line;

  const syntax = doc.errors[0];
  if (syntax) throw fail(`(line ${lineAt(syntax.pos[0])}) is not valid YAML: ${syntax.message}`);

  // A missing key has no node, so fall back to the nearest enclosing node that does.
  const lineOf = (path: PropertyKey[]): number => {
    for (let n = path.length; n > 0; n--) {
      const node = doc.getIn(path.slice(0, n), true);
      if (isNode(node) && node.range) return lineAt(node.range[0]);
    }
    return isNode(doc.contents) && doc.contents.range ? lineAt(doc.contents.range[0]) : 1;
  };
  const where = (path: PropertyKey[]) => `${formatPath(path)} (line ${lineOf(path)})`;

  const parsed = TokensFile.safeParse(doc.toJS());
  if (!parsed.success) {
    throw fail(
      parsed.error.issues.map((issue) => {
        if (issue.code === "unrecognized_keys") {
          const key = issue.keys[0] ?? "";
          return `${where([...issue.path, key])} is not a known field`;
        }
        return `${where(issue.path)} ${issue.message}`;
      }).join("; "),
    );
  }

  const byHash = new Map<string, TokenPayload>();
  const firstIndex = new Map<string, number>();
  parsed.data.tokens.forEach((entry, i) => {
    const seen = firstIndex.get(entry.sha256);
    if (seen !== undefined) {
      throw fail(
        `${where(["tokens", i, "sha256"])} repeats the hash at ${
          where(["tokens", seen, "sha256"])
        }; list each token once`,
      );
    }
    firstIndex.set(entry.sha256, i);
    // A short hash prefix identifies the caller in logs without revealing the token.
    const subject = entry.subject ?? `token:${entry.sha256.slice(0, 12)}`;
    // Entries naming one subject are one caller (a token being rotated), never a static token's or
    // a JWT's that happens to carry the same name.
    byHash.set(entry.sha256, {
      tenant: entry.tenant,
      scopes: entry.scopes,
      subject,
      principal: principalOf("tokens_file", subject),
    });
  });
  return byHash;
}

/** Reads and parses a tokens file; see {@link parseTokensFile}. */
export async function loadTokensFile(
  path: string,
  readTextFile: (path: string) => Promise<string> = Deno.readTextFile,
): Promise<Map<string, TokenPayload>> {
  let source: string;
  try {
    source = await readTextFile(path);
  } catch (e) {
    throw new Error(`Cannot load tokens file "${path}": ${e instanceof Error ? e.message : e}`, {
      cause: e,
    });
  }
  return parseTokensFile(source, path);
}

function formatPath(path: PropertyKey[]): string {
  if (path.length === 0) return "the file";
  return path.map((k, i) => typeof k === "number" ? `[${k}]` : `${i ? "." : ""}${String(k)}`)
    .join("");
}
