/**
 * Edits the fleet file on behalf of the admin API, the way a careful person would by hand.
 *
 * The file is a document people write and comment, so edits go through the `yaml` Document API:
 * only the touched entry changes, every comment and the layout of the other entries stay. The new
 * text is validated before anything is written (a refused edit leaves the file byte-for-byte
 * unchanged), written atomically (a temp file in the same directory, then a rename, so the file
 * watcher and a crash never see half a file), and the previous text is kept as `<file>.bak`. Edits
 * of one file run one at a time, so two concurrent adds both land instead of the second
 * overwriting the first.
 * @module
 */
import { Document, isMap, isScalar, isSeq, parseDocument, type YAMLMap, YAMLSeq } from "yaml";
import { GatewayError } from "../support/errors.ts";

/**
 * Why an edit was refused: the result is invalid, the entry is not there, the id is taken, or
 * (cluster mode) the shared fleet moved past the revision the caller edited, or the fleet is
 * read from mounted files.
 */
export type FleetEditFailure =
  | "invalid"
  | "not_found"
  | "conflict"
  | "revision_conflict"
  | "read_only";

/** An edit that was refused; the file is unchanged. */
export class FleetEditError extends Error {
  override readonly name = "FleetEditError";
  /** What kind of refusal (maps to 400, 404, 409). */
  readonly kind: FleetEditFailure;
  /** Every problem, as `file:line: …` where the validator gives one. */
  readonly problems: string[];
  /** With `revision_conflict`: the shared fleet's current revision, to edit again from. */
  readonly revision: number | undefined;

  constructor(
    kind: FleetEditFailure,
    message: string,
    problems: string[] = [message],
    revision?: number,
  ) {
    super(message);
    this.kind = kind;
    this.problems = problems;
    this.revision = revision;
  }
}

/**
 * A change to the file: given its parsed document and its text, the new text, or undefined when
 * nothing needed to change. Edits splice the text at the node ranges the document gives, so every
 * byte outside the touched entry stays as written (re-printing the whole document would restyle
 * flow collections and fold long lines of entries nobody touched).
 */
export type FleetEdit = (doc: Document, text: string) => string | undefined;

/** What {@link editFleetFile} needs besides the edit. */
export interface FleetEditOptions<V, R> {
  /** Validates the candidate text; throws (a `config_invalid` GatewayError) to refuse it. */
  validate: (text: string) => V;
  /** Runs after a write, still holding the file's lock (apply the fleet here, in file order). */
  apply?: (validated: V) => Promise<R>;
}

/** What an edit did. */
export interface FleetEditResult<V, R> {
  /** False when the edit found nothing to change (nothing was written). */
  changed: boolean;
  validated: V;
  applied?: R;
}

// One chain per file: edits (and the fleet application that follows each) never interleave.
const locks = new Map<string, Promise<unknown>>();

/** Runs `fn` once every earlier holder of `path`'s lock has finished. */
export function withFleetLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const previous = locks.get(path) ?? Promise.resolve();
  const run = previous.then(fn, fn);
  const settled = run.catch(() => {});
  locks.set(path, settled);
  // Drop the entry once idle, so the map does not grow with every file ever edited.
  void settled.then(() => {
    if (locks.get(path) === settled) locks.delete(path);
  });
  return run;
}

/** Reads, edits, validates, backs up and atomically rewrites the fleet file, under its lock. */
export function editFleetFile<V, R = never>(
  path: string,
  edit: FleetEdit,
  options: FleetEditOptions<V, R>,
): Promise<FleetEditResult<V, R>> {
  return withFleetLock(path, async () => {
    const before = await Deno.readTextFile(path);
    const { changed, text, validated } = editFleetText(path, before, edit, options.validate);
    if (changed) await writeAtomically(path, text, before);
    const result: FleetEditResult<V, R> = { changed, validated };
    if (options.apply && changed) result.applied = await options.apply(validated);
    return result;
  });
}

/**
 * Edits fleet text in memory and validates the result (the part of an edit that does not care
 * where the text is kept: a file, or the cluster's shared bucket); `where` names it in messages.
 * Throws a {@link FleetEditError} when the text does not parse or the result is refused.
 */
export function editFleetText<V>(
  where: string,
  before: string,
  edit: FleetEdit,
  validate: (text: string) => V,
): { changed: boolean; text: string; validated: V } {
  const doc = parseDocument(before, { keepSourceTokens: false });
  if (doc.errors.length > 0) {
    const problems = doc.errors.map((e) => `${where}:${(e.linePos?.[0].line ?? 1)}: ${e.message}`);
    throw new FleetEditError(
      "invalid",
      `The fleet "${where}" does not parse, so it cannot be edited; fix it by hand first:\n  - ${
        problems.join("\n  - ")
      }`,
      problems,
    );
  }
  const edited = edit(doc, before);
  const changed = edited !== undefined && edited !== before;
  const text = changed ? edited : before;
  try {
    return { changed, text, validated: validate(text) };
  } catch (error) {
    if (error instanceof GatewayError) {
      const problems = Array.isArray(error.data.problems)
        ? error.data.problems.map(String)
        : [error.message];
      throw new FleetEditError(
        "invalid",
        `The change would make the fleet invalid, so "${where}" was left unchanged:\n  - ${
          problems.join("\n  - ")
        }`,
        problems,
      );
    }
    throw error;
  }
}

/** How {@link addServer} writes an entry. */
export interface AddServerOptions {
  /**
   * A comment line written just above the entry, as a comment node of the document (sync's and
   * discovery's markers): one line of printable ASCII, without the leading `#`.
   */
  comment?: string;
}

/**
 * The YAML text of one entry as {@link addServer} writes it (a list item, unindented), with its
 * comment line: what a proposal shows is exactly what lands in the file.
 */
export function entryText(entry: Record<string, unknown>, options: AddServerOptions = {}): string {
  const printed = new Document([entry]);
  const item = (printed.contents as YAMLSeq).items[0];
  styled(item);
  if (options.comment !== undefined) {
    (item as YAMLMap).commentBefore = checkComment(options.comment);
  }
  return printed.toString(STRINGIFY);
}

/** Appends one server entry (an object in the file's own format); refuses a duplicate id. */
export function addServer(
  entry: Record<string, unknown>,
  options: AddServerOptions = {},
): FleetEdit {
  return addServers([{ entry, ...options }]);
}

/**
 * Appends several entries in one edit, in order (one parse and one print however many: a first
 * sync can add hundreds); refuses an id already in the file or given twice.
 */
export function addServers(
  entries: readonly ({ entry: Record<string, unknown> } & AddServerOptions)[],
): FleetEdit {
  return (doc, text) => {
    if (entries.length === 0) return undefined;
    const servers = serverList(doc);
    const seen = new Set<unknown>();
    for (const { entry } of entries) {
      const id = entry.id;
      if (
        typeof id === "string" &&
        (seen.has(id) || (servers && findServer(servers, id) !== undefined))
      ) {
        throw new FleetEditError(
          "conflict",
          `A server "${id}" is already in the fleet file; pick another id or change it with its own routes`,
        );
      }
      seen.add(id);
    }
    const last = servers?.items.at(-1);
    if (!servers || servers.flow || !isMap(last) || last.flow || !last.range) {
      // Nothing of the list's layout to keep: let the document print it.
      const list = servers ?? createServerList(doc);
      for (const { entry, comment } of entries) {
        const node = styled(doc.createNode(entry));
        if (comment !== undefined) {
          // A flow list cannot hold comments: it is printed as a block list.
          list.flow = false;
          for (const item of list.items) if (isMap(item)) item.flow = false;
          node.commentBefore = checkComment(comment);
        }
        list.add(node);
      }
      return doc.toString(STRINGIFY);
    }
    const dash = text.lastIndexOf("-", last.range[0]);
    const indent = " ".repeat(dash - lineStart(text, dash));
    const block = entries.map(({ entry, comment }) =>
      entryText(entry, comment === undefined ? {} : { comment }).trimEnd().split("\n")
        .map((line) => indent + line).join("\n") + "\n"
    ).join("");
    const at = servers.range?.[2] ?? text.length;
    const join = at > 0 && text[at - 1] !== "\n" ? "\n" : "";
    return text.slice(0, at) + join + block + text.slice(at);
  };
}

/** A comment's text, refused unless it is one line of printable ASCII. */
function checkComment(comment: string): string {
  if (!/^[\x20-\x7e]*$/.test(comment) || comment.length > 512) {
    throw new FleetEditError(
      "invalid",
      "A fleet comment must be one line of printable ASCII (at most 512 characters); nothing was written",
    );
  }
  return comment.startsWith(" ") ? comment : ` ${comment}`;
}

/** Removes the server entry with this id (and the comment lines just above it). */
export function removeServer(id: string): FleetEdit {
  return (doc, text) => {
    const servers = serverList(doc);
    const index = servers ? findServer(servers, id) : undefined;
    if (servers === undefined || index === undefined) throw notInFile(id);
    const item = servers.items[index] as YAMLMap;
    const previous = servers.items[index - 1] as YAMLMap | undefined;
    if (servers.flow || item.flow || !item.range || (previous && !previous.range)) {
      servers.items.splice(index, 1);
      return doc.toString(STRINGIFY);
    }
    // The comment lines above an entry describe it: they go with it.
    const from = item.commentBefore && previous?.range
      ? lineEnd(text, previous.range[2])
      : lineStart(text, text.lastIndexOf("-", item.range[0]));
    const to = lineEnd(text, item.range[2]);
    return text.slice(0, from) + text.slice(to);
  };
}

/** Sets `enabled` of the server entry with this id; unchanged when it already had that value. */
export function setServerEnabled(id: string, enabled: boolean): FleetEdit {
  return (doc, text) => {
    const servers = serverList(doc);
    const index = servers ? findServer(servers, id) : undefined;
    if (servers === undefined || index === undefined) throw notInFile(id);
    const item = servers.items[index] as YAMLMap;
    const current = item.get("enabled");
    // An absent `enabled` means true: enabling such an entry changes nothing.
    if ((current ?? true) === enabled) return undefined;
    const value = item.get("enabled", true);
    if (isScalar(value) && value.range) {
      return text.slice(0, value.range[0]) + String(enabled) + text.slice(value.range[1]);
    }
    if (item.flow || !item.range) {
      item.set("enabled", enabled);
      return doc.toString(STRINGIFY);
    }
    const indent = " ".repeat(item.range[0] - lineStart(text, item.range[0]));
    const at = lineEnd(text, item.range[2]);
    const join = at > 0 && text[at - 1] !== "\n" ? "\n" : "";
    return text.slice(0, at) + join + `${indent}enabled: ${enabled}\n` + text.slice(at);
  };
}

// lineWidth 0: never fold long lines; no padding: lists print as `["deno", "run"]`.
const STRINGIFY = { lineWidth: 0, flowCollectionPadding: false } as const;

/** The `proxy_servers` list, or undefined when the file has none yet. */
function serverList(doc: Document): YAMLSeq | undefined {
  const contents: unknown = doc.contents;
  if (contents === null || contents === undefined) return undefined;
  if (isScalar(contents) && contents.value === null) return undefined;
  if (!isMap(contents)) {
    throw new FleetEditError(
      "invalid",
      "The fleet file is not a mapping with a proxy_servers list; fix it by hand first",
    );
  }
  const list = contents.get("proxy_servers", true);
  if (isSeq(list)) return list;
  if (list === undefined || list === null || (isScalar(list) && list.value === null)) {
    return undefined;
  }
  throw new FleetEditError(
    "invalid",
    "proxy_servers in the fleet file is not a list; fix it by hand first",
  );
}

function createServerList(doc: Document): YAMLSeq {
  const seq = new YAMLSeq();
  if (isMap(doc.contents)) {
    doc.contents.set("proxy_servers", seq);
  } else {
    const root = doc.createNode({}) as YAMLMap;
    root.set("proxy_servers", seq);
    root.commentBefore = doc.contents?.commentBefore ?? doc.contents?.comment ?? null;
    doc.contents = root as unknown as Document["contents"];
  }
  return seq;
}

function findServer(servers: YAMLSeq, id: string): number | undefined {
  const index = servers.items.findIndex((item) => isMap(item) && item.get("id") === id);
  return index === -1 ? undefined : index;
}

function notInFile(id: string): FleetEditError {
  return new FleetEditError(
    "not_found",
    `No server "${id}" in the fleet file; list them with GET /v1/mcp/proxy/servers`,
  );
}

function lineStart(text: string, offset: number): number {
  return text.lastIndexOf("\n", offset - 1) + 1;
}

/** The offset just after the line holding `offset` (unchanged when already at a line start). */
function lineEnd(text: string, offset: number): number {
  if (offset === 0 || text[offset - 1] === "\n") return offset;
  const newline = text.indexOf("\n", offset);
  return newline === -1 ? text.length : newline + 1;
}

/** Lists of scalars read best on one line, like `command: ["deno", "run", "x.ts"]`. */
function styled<T>(node: T): T {
  if (isSeq(node)) {
    if (node.items.length > 0 && node.items.every((item) => isScalar(item))) {
      node.flow = true;
      for (const item of node.items) {
        if (isScalar(item) && typeof item.value === "string") item.type = "QUOTE_DOUBLE";
      }
    } else {
      for (const item of node.items) styled(item);
    }
  } else if (isMap(node)) {
    for (const pair of node.items) styled(pair.value);
  }
  return node;
}

/** Temp file beside the target, backup of the old text, then one rename. */
async function writeAtomically(path: string, text: string, previous: string): Promise<void> {
  const slash = path.lastIndexOf("/");
  const dir = slash === -1 ? "." : path.slice(0, slash) || "/";
  const name = path.slice(slash + 1);
  const temp = `${dir}/.${name}.${crypto.randomUUID()}.tmp`;
  let mode: number | null = null;
  try {
    mode = (await Deno.stat(path)).mode;
  } catch {
    // No mode to keep.
  }
  try {
    await Deno.writeTextFile(temp, text, mode === null ? {} : { mode: mode & 0o777 });
    await Deno.writeTextFile(`${path}.bak`, previous);
    await Deno.rename(temp, path);
  } catch (error) {
    await Deno.remove(temp).catch(() => {});
    throw error;
  }
}
