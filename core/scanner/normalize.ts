/**
 * Turns descriptor snapshots into the model rules check: every model-visible string of every
 * tool, prompt, resource, template and instructions block, with a JSON Pointer, plus the text
 * decoded from hidden payloads (so each rule rescans it).
 * @module
 */
import type {
  ScanEntity,
  ScanEntityKind,
  ScanModel,
  ScanServer,
  ScanText,
} from "../plugin_api/mod.ts";
import { decodeHidden, normalizeText } from "./decode.ts";
import type { ServerDescriptor } from "./descriptor.ts";

/** Escapes one JSON Pointer reference token (RFC 6901). */
export function pointerToken(token: string | number): string {
  return String(token).replaceAll("~", "~0").replaceAll("/", "~1");
}

const LISTS: [keyof ServerDescriptor, ScanEntityKind][] = [
  ["tools", "tool"],
  ["prompts", "prompt"],
  ["resources", "resource"],
  ["resourceTemplates", "resource-template"],
];

/** The scan model of a fleet; pointers are relative to `{ servers: descriptors }`. */
export function buildScanModel(descriptors: readonly ServerDescriptor[]): ScanModel {
  return { servers: descriptors.map((d, i) => normalizeServer(d, `/servers/${i}`)) };
}

function normalizeServer(descriptor: ServerDescriptor, at: string): ScanServer {
  const entities: ScanEntity[] = [];
  if (typeof descriptor.instructions === "string" && descriptor.instructions) {
    const texts: ScanText[] = [];
    push(texts, `${at}/instructions`, "instructions", descriptor.instructions);
    entities.push({
      server: descriptor.id,
      kind: "instructions",
      name: "instructions",
      pointer: `${at}/instructions`,
      texts,
      raw: { instructions: descriptor.instructions },
    });
  }
  for (const [list, kind] of LISTS) {
    const items = descriptor[list];
    if (!Array.isArray(items)) continue;
    items.forEach((item, i) => {
      const raw = (item ?? {}) as Record<string, unknown>;
      const pointer = `${at}/${list}/${i}`;
      entities.push({
        server: descriptor.id,
        kind,
        name: entityName(raw, kind, i),
        pointer,
        texts: collectTexts(raw, pointer),
        raw,
      });
    });
  }
  return { id: descriptor.id, entities };
}

function entityName(raw: Record<string, unknown>, kind: ScanEntityKind, index: number): string {
  for (const key of ["name", "uri", "uriTemplate"]) {
    const value = raw[key];
    if (typeof value === "string" && value) return value;
  }
  return `${kind}#${index}`;
}

// Keys whose string values a model reads as prose, anywhere in a descriptor (schemas included).
const PROSE_KEYS = new Set(["description", "title", "text", "instructions"]);
// Keys whose values are identifiers.
const NAME_KEYS = new Set(["name", "uri", "uriTemplate"]);
// A schema's `type` names one of these; nothing else is worth a text of its own.
const JSON_TYPES = new Set(["object", "array", "string", "number", "integer", "boolean", "null"]);
// Keys that are identifiers (`$defs`, `x-vendor`, `io.example/ui`) carry no prose; others do.
const IDENTIFIER_KEY = /^[\w$@.:/-]{1,64}$/;

/** One value still to walk: where it is and which key holds it (array items inherit theirs). */
interface Pending {
  value: unknown;
  pointer: string;
  key: string | undefined;
}

/**
 * Every string and every non-identifier key of an entity, in document order. Any key a model
 * may read counts (`$comment`, `x-*`, `pattern`, `errorMessage`, `_meta`, object-valued
 * `default` and `examples`, `required`), since a client can show a model the whole descriptor.
 * The walk has no depth limit of its own: the catalog's limits.schema_depth and size limits
 * bound what it admits, and everything admitted is scanned (iteratively, so no stack limit),
 * in time linear in the descriptor's size.
 */
function collectTexts(raw: Record<string, unknown>, pointer: string): ScanText[] {
  const texts: ScanText[] = [];
  const seen = new WeakSet<object>();
  const stack: Pending[] = [{ value: raw, pointer, key: undefined }];
  while (stack.length > 0) {
    const { value, pointer: at, key } = stack.pop()!;
    if (typeof value === "string") {
      if (key !== undefined) pushValue(texts, at, key, value);
      continue;
    }
    if (!value || typeof value !== "object" || seen.has(value)) continue;
    seen.add(value);
    const children: Pending[] = [];
    if (Array.isArray(value)) {
      value.forEach((item, i) => children.push({ value: item, pointer: `${at}/${i}`, key }));
    } else {
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        const member = `${at}/${pointerToken(k)}`;
        if (k === "properties" && isRecord(v)) {
          // Parameter names are model-visible identifiers too.
          for (const [name, schema] of Object.entries(v)) {
            const paramAt = `${member}/${pointerToken(name)}`;
            children.push({ value: name, pointer: paramAt, key: PARAM });
            children.push({ value: schema, pointer: paramAt, key: undefined });
          }
          continue;
        }
        if (!IDENTIFIER_KEY.test(k)) children.push({ value: k, pointer: member, key: KEY });
        children.push({ value: v, pointer: member, key: k });
      }
    }
    // Reversed onto the stack, so texts come out in document order.
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return texts;
}

// Sentinel keys: a parameter name, and an object key read as text.
const PARAM = "\u0000param";
const KEY = "\u0000key";

function isRecord(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === "object" && !Array.isArray(value);
}

function pushValue(texts: ScanText[], pointer: string, key: string, value: string): void {
  if (key === PARAM) push(texts, pointer, "param-name", value);
  else if (NAME_KEYS.has(key)) push(texts, pointer, "name", value);
  else if (key === "title") push(texts, pointer, "title", value);
  else if (PROSE_KEYS.has(key)) push(texts, pointer, "description", value);
  else if (key === "type" && JSON_TYPES.has(value)) return;
  else push(texts, pointer, "text", value);
}

/**
 * The most characters of one field the rules read. Longer fields are cut here (and flagged by the
 * oversized-text rule), so no field can make a scan slow; the longest description among the
 * corpus of real servers is ~34,000 characters.
 */
export const MAX_FIELD_CHARS = 64 * 1024;

function push(
  texts: ScanText[],
  pointer: string,
  field: ScanText["field"],
  full: string,
): void {
  const text = full.length > MAX_FIELD_CHARS ? full.slice(0, MAX_FIELD_CHARS) : full;
  texts.push(
    text === full ? { pointer, field, text } : { pointer, field, text, truncatedFrom: full.length },
  );
  // Rules match the text as a model reads it: full-width letters folded, joiners dropped.
  const seen = new Set([text]);
  const add = (t: string, f: ScanText["field"], from: NonNullable<ScanText["decodedFrom"]>) => {
    if (seen.has(t)) return false;
    seen.add(t);
    texts.push({ pointer, field: f, text: t, decodedFrom: from });
    return true;
  };
  const clean = normalizeText(text);
  add(clean, field, "nfkc");
  // Decoded payloads are rescanned as prose; two levels catch base64 inside Tag text. Tags and
  // variation selectors are read from the raw text (normalizing removes them), the rest from both.
  let layer = clean === text ? [text] : [text, clean];
  for (let level = 0; level < 2 && layer.length > 0; level++) {
    const next: string[] = [];
    for (const t of layer) {
      for (const decoded of decodeHidden(t)) {
        const body = normalizeText(decoded.text);
        if (add(body, "description", decoded.from)) next.push(decoded.text);
      }
    }
    layer = next;
  }
}
