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
import { decodeHidden } from "./decode.ts";
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
// String-valued schema keys that reach the model as examples and choices.
const VALUE_KEYS = new Set(["default", "examples", "enum", "const", "example"]);

function collectTexts(raw: Record<string, unknown>, pointer: string): ScanText[] {
  const texts: ScanText[] = [];
  walk(raw, pointer, texts, undefined, 0);
  return texts;
}

function walk(
  value: unknown,
  pointer: string,
  texts: ScanText[],
  key: string | undefined,
  depth: number,
): void {
  if (depth > 32) return;
  if (typeof value === "string") {
    if (key === undefined) return;
    if (NAME_KEYS.has(key)) push(texts, pointer, "name", value);
    else if (key === "title") push(texts, pointer, "title", value);
    else if (PROSE_KEYS.has(key)) push(texts, pointer, "description", value);
    else if (VALUE_KEYS.has(key)) push(texts, pointer, "text", value);
    return;
  }
  if (Array.isArray(value)) {
    // Array items inherit their key: enum/examples values, argument lists.
    value.forEach((item, i) => walk(item, `${pointer}/${i}`, texts, key, depth + 1));
    return;
  }
  if (!value || typeof value !== "object") return;
  const object = value as Record<string, unknown>;
  for (const [k, v] of Object.entries(object)) {
    const at = `${pointer}/${pointerToken(k)}`;
    if (k === "properties" && v && typeof v === "object" && !Array.isArray(v)) {
      // Parameter names are model-visible identifiers too.
      for (const [name, schema] of Object.entries(v as Record<string, unknown>)) {
        const paramAt = `${at}/${pointerToken(name)}`;
        push(texts, paramAt, "param-name", name);
        walk(schema, paramAt, texts, undefined, depth + 1);
      }
      continue;
    }
    walk(v, at, texts, k, depth + 1);
  }
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
  // Decoded payloads are rescanned as prose; two levels catch base64 inside Tag text.
  let layer = [text];
  for (let level = 0; level < 2 && layer.length > 0; level++) {
    const next: string[] = [];
    for (const t of layer) {
      for (const decoded of decodeHidden(t)) {
        texts.push({
          pointer,
          field: "description",
          text: decoded.text,
          decodedFrom: decoded.from,
        });
        next.push(decoded.text);
      }
    }
    layer = next;
  }
}
