/**
 * YAML configuration files read for the person editing them: the parsed data keeps a way back to
 * the line each value was written on, and problems are collected and reported together as
 * `file:line: what is wrong and how to fix it`, rather than one per restart.
 * @module
 */
import { isMap, isNode, isScalar, isSeq, LineCounter, parseDocument } from "yaml";
import { GatewayError } from "../support/errors.ts";

/** A place in a YAML document: mapping keys and list indexes from the root. */
export type YamlPath = readonly (string | number)[];

/** A parsed YAML file that still knows where each value was written. */
export interface YamlSource {
  /** The file path as given. */
  path: string;
  /** The document as plain data; `null` for an empty file. */
  root: unknown;
  /**
   * The 1-based line of the value at `at`: a mapping entry's key line, a list item's own line;
   * a path that stops short (a missing field) gives the nearest enclosing node's line.
   */
  lineOf(at: YamlPath): number;
}

/**
 * Parses YAML text; syntax errors go to `problems` as `file:line:col: invalid YAML: …` and the
 * result is undefined, so a caller reading several files can still report them all at once.
 */
export function parseYamlSource(
  text: string,
  path: string,
  problems: ProblemList,
): YamlSource | undefined {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    for (const error of doc.errors) {
      const { line, col } = lineCounter.linePos(error.pos[0]);
      problems.addAt(path, line, `invalid YAML: ${error.message}`, col);
    }
    return undefined;
  }

  let root: unknown;
  try {
    root = doc.toJS();
  } catch (error) {
    // Only alias bombs get here: the document itself parsed.
    problems.addAt(path, 1, error instanceof Error ? error.message : String(error));
    return undefined;
  }

  const lineAt = (offset: number) => lineCounter.linePos(offset).line;
  // Walks the nodes rather than `doc.getIn` so a map entry reports its key's line, and a path
  // that stops short reports the nearest enclosing node's line.
  const lineOf = (at: YamlPath): number => {
    let node: unknown = doc.contents;
    let line = isNode(node) && node.range ? lineAt(node.range[0]) : 1;
    for (const key of at) {
      if (isMap(node)) {
        const pair = node.items.find((p) =>
          String(isScalar(p.key) ? p.key.value : p.key) === String(key)
        );
        if (!pair) break;
        if (isNode(pair.key) && pair.key.range) line = lineAt(pair.key.range[0]);
        node = pair.value;
      } else if (isSeq(node) && typeof key === "number") {
        node = node.items[key];
        if (!isNode(node)) break;
        if (node.range) line = lineAt(node.range[0]);
      } else {
        break;
      }
    }
    return line;
  };
  return { path, root, lineOf };
}

/** Every problem found in one or more YAML files, thrown together as one `config_invalid`. */
export class ProblemList {
  readonly #what: string;
  readonly #path: string;
  readonly #problems: { file: string; line: number; text: string }[] = [];

  /** `what` names the kind of file (`fleet config`); `path` is the file or directory read. */
  constructor(what: string, path: string) {
    this.#what = what;
    this.#path = path;
  }

  /** The number of problems so far. */
  get size(): number {
    return this.#problems.length;
  }

  /** Records a problem with the value at `at`, named by its path: `tenants.acme.allow[2] …`. */
  add(source: YamlSource, at: YamlPath, message: string): void {
    this.addAt(source.path, source.lineOf(at), `${formatPath(at)} ${message}`);
  }

  /** Records a message as written, at a line (and column) of a file. */
  addAt(file: string, line: number, message: string, col?: number): void {
    const where = col === undefined ? `${file}:${line}` : `${file}:${line}:${col}`;
    this.#problems.push({ file, line, text: `${where}: ${message}` });
  }

  /**
   * Records a key that is not one of `known`, with the known key it most likely meant: unknown
   * keys are errors because a typo would otherwise be silently ignored. `hint` adds words after
   * a suggestion, e.g. ` (in seconds)`.
   */
  unknownKey(
    source: YamlSource,
    at: YamlPath,
    known: readonly string[],
    hint: (suggestion: string) => string = () => "",
  ): void {
    const close = suggest(String(at[at.length - 1]), known);
    this.add(
      source,
      at,
      close
        ? `is not a known field; did you mean "${close}"${hint(close)}?`
        : `is not a known field; known fields are ${known.join(", ")}`,
    );
  }

  /** The `config_invalid` error listing every problem, by file (in the order first seen), then line. */
  error(): GatewayError {
    const files = [...new Set(this.#problems.map((p) => p.file))];
    // Stable sort: problems on one line keep the order they were found in.
    const problems = this.#problems.toSorted((a, b) =>
      files.indexOf(a.file) - files.indexOf(b.file) || a.line - b.line
    ).map((p) => p.text);
    return new GatewayError(
      "config_invalid",
      `Invalid ${this.#what} "${this.#path}":\n  - ${problems.join("\n  - ")}`,
      { path: this.#path, problems },
    );
  }

  /** Throws {@link ProblemList.error} when any problem was recorded. */
  throwIfAny(): void {
    if (this.#problems.length > 0) throw this.error();
  }
}

/** True for a YAML mapping (a plain object once parsed). */
export function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A value as the error reader wrote it, for "received …": strings quoted, collections named. */
export function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "an empty value";
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  return String(value);
}

/**
 * A path as the reader would write it: `tenants.acme.allow[2]`, a key with other characters than
 * names and globs use quoted (`rate_limits["proxy://fs/*"]`); the root is `the file`.
 */
export function formatPath(path: YamlPath): string {
  if (path.length === 0) return "the file";
  return path.map((k, i) =>
    typeof k === "number"
      ? `[${k}]`
      : PLAIN_KEY.test(k)
      ? `${i ? "." : ""}${k}`
      : `[${JSON.stringify(k)}]`
  ).join("");
}

const PLAIN_KEY = /^[A-Za-z0-9_.\-*?]+$/;

/**
 * The known word `word` most likely meant, or undefined: the same ignoring case, `-` and `_` and a
 * unit suffix (`connect_ms` means `connect`), or otherwise within 2 edits.
 */
export function suggest(word: string, known: readonly string[]): string | undefined {
  const normal = word.toLowerCase().replaceAll("-", "_");
  const unitless = normal.replace(/_(?:ms|s|secs?|seconds|millis)$/, "");
  const squash = (text: string) => text.toLowerCase().replace(/[-_]/g, "");
  const exact = known.find((k) => squash(k) === squash(normal) || squash(k) === squash(unitless));
  if (exact) return exact;
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of known) {
    const d = editDistance(normal, candidate.toLowerCase());
    if (d < bestDistance && d < candidate.length) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length]!;
}
