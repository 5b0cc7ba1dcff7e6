/**
 * Canonical JSON and the arguments hash: one byte string per JSON value, so a hash taken when
 * a call is approved matches the hash of the same arguments when the call is retried, whatever
 * the key order the client sent.
 *
 * Keys are sorted by UTF-16 code units and numbers use ECMAScript formatting, as in RFC 8785.
 * @module
 */
import { createHash } from "node:crypto";

/**
 * The canonical JSON text of a value: object keys sorted recursively, no whitespace, arrays in
 * order. Throws TypeError for anything JSON cannot carry (undefined outside an object property,
 * NaN, Infinity, functions, symbols, bigints, cycles, non-plain objects such as Date or Map).
 * Object properties whose value is undefined are omitted, as JSON.stringify and the wire do.
 */
export function canonicalJson(value: unknown): string {
  return encode(value, [], new Set());
}

/**
 * Where a value sits, as segments (a key, or an index): spelled out (`$[0].key`) only for an
 * error, so encoding a large array builds no path string per item.
 */
type Path = (string | number)[];

function at(path: Path): string {
  return "$" + path.map((s) => typeof s === "number" ? `[${s}]` : `.${s}`).join("");
}

function encode(value: unknown, path: Path, ancestors: Set<object>): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) {
        throw new TypeError(`${at(path)} is ${value}, which JSON cannot represent`);
      }
      // JSON.stringify prints -0 as 0, as canonical JSON requires.
      return JSON.stringify(value);
    case "object":
      if (value === null) return "null";
      return encodeObject(value, path, ancestors);
    case "undefined":
      throw new TypeError(`${at(path)} is undefined, which JSON cannot represent`);
    default:
      throw new TypeError(`${at(path)} is a ${typeof value}, which JSON cannot represent`);
  }
}

function encodeObject(value: object, path: Path, ancestors: Set<object>): string {
  if (ancestors.has(value)) throw new TypeError(`${at(path)} is a circular reference`);
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      const items: string[] = [];
      // Index loop, not map(): map skips holes, and a hole is undefined, which JSON lacks.
      for (let i = 0; i < value.length; i++) {
        path.push(i);
        items.push(encode(value[i], path, ancestors));
        path.pop();
      }
      return `[${items.join(",")}]`;
    }
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const name = (value as { constructor?: { name?: string } }).constructor?.name ?? "object";
      throw new TypeError(`${at(path)} is a ${name}, not a plain JSON object`);
    }
    const record = value as Record<string, unknown>;
    const members: string[] = [];
    for (const key of Object.keys(record).sort()) {
      const member = record[key];
      if (member === undefined) continue;
      path.push(key);
      members.push(`${JSON.stringify(key)}:${encode(member, path, ancestors)}`);
      path.pop();
    }
    return `{${members.join(",")}}`;
  } finally {
    // Only ancestors count: the same object twice side by side is fine, a cycle is not.
    ancestors.delete(value);
  }
}

/** The SHA-256 of the UTF-8 bytes of `text`, as 64 lowercase hex digits, computed now. */
export function sha256HexSync(text: string): string {
  // node:crypto hashes synchronously in ~2 µs; WebCrypto's async digest costs ~20 µs per call,
  // which is most of the governance budget on every tools/call.
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** {@link sha256HexSync} for callers that await. */
export function sha256Hex(text: string): Promise<string> {
  return Promise.resolve(sha256HexSync(text));
}

/** The hash that binds an approval to exact arguments: SHA-256 of their canonical JSON. */
export function argumentsHash(args: Record<string, unknown> | undefined): Promise<string> {
  // A non-JSON value becomes a rejection rather than a synchronous throw: callers await.
  try {
    return sha256Hex(canonicalJson(args ?? {}));
  } catch (error) {
    return Promise.reject(error);
  }
}
