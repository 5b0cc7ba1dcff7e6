/**
 * The references of one JSON Schema document resolved as ajv resolves them: `#/json/pointer`,
 * `#anchor` (`$anchor`, `$dynamicAnchor`, draft-07's `$id: "#name"`) and URIs against the base a
 * nested `$id` sets, so a schema cannot hide what a `$ref` applies behind a base URI.
 * @module
 */

/** Keywords whose values are data or annotations, never applied as schemas. */
export const NOT_SCHEMAS = new Set([
  "enum",
  "const",
  "default",
  "examples",
  "$comment",
  "description",
]);

/** Keywords whose values map names to subschemas. */
const SCHEMA_MAPS = new Set([
  "properties",
  "patternProperties",
  "dependentSchemas",
  "dependencies",
  "$defs",
  "definitions",
]);

/** The base URI of a schema without `$id` (any absolute URI resolves fragments against it). */
const ROOT_BASE = "agent33:/schema";

/** A schema node: an object, or the boolean schemas `true` and `false`. */
export type SchemaNode = Record<string, unknown> | boolean;

/** Every base URI, `$id` and anchor of one schema document. */
export class SchemaRefs {
  readonly #root: SchemaNode;
  readonly #resources = new Map<string, SchemaNode>();
  readonly #anchors = new Map<string, SchemaNode>();
  readonly #bases = new Map<SchemaNode, string>();
  readonly #dynamic = new Map<string, SchemaNode[]>();
  readonly #recursive: SchemaNode[] = [];

  /** Indexes `root`, whose own `$id` is ignored (schema_validator.ts drops it before compiling). */
  constructor(root: SchemaNode) {
    this.#root = root;
    this.#resources.set(ROOT_BASE, root);
    this.#recursive.push(root);
    this.#index(root, ROOT_BASE);
  }

  /**
   * Every node a dynamic reference may name besides its static target: ajv picks one by the
   * scope a value is checked in, so a bound takes them all (`$dynamicRef: "#name"`: each
   * `$dynamicAnchor: name`; `$recursiveRef`: each `$recursiveAnchor: true`, and the root).
   */
  dynamicTargets(keyword: "$dynamicRef" | "$recursiveRef", ref: string): readonly SchemaNode[] {
    if (keyword === "$recursiveRef") return this.#recursive;
    const hash = ref.indexOf("#");
    return (hash < 0 ? undefined : this.#dynamic.get(ref.slice(hash + 1))) ?? [];
  }

  /** The node the reference `ref` in `from` names; undefined when it names nothing here. */
  resolve(from: SchemaNode, ref: string): SchemaNode | undefined {
    const url = absolute(ref, this.#bases.get(from) ?? ROOT_BASE);
    const hash = url.indexOf("#");
    const document = hash < 0 ? url : url.slice(0, hash);
    const fragment = hash < 0 ? "" : url.slice(hash + 1);
    const resource = this.#resources.get(document);
    if (resource === undefined || fragment === "") return resource;
    if (!fragment.startsWith("/")) return this.#anchors.get(`${document}#${fragment}`);
    let at: unknown = resource;
    for (const raw of fragment.slice(1).split("/")) {
      const segment = unescape(raw);
      if (segment === undefined || at === null || typeof at !== "object") return undefined;
      at = (at as Record<string, unknown>)[segment];
    }
    return isNode(at) ? at : undefined;
  }

  #index(node: unknown, base: string): void {
    if (Array.isArray(node)) {
      for (const item of node) this.#index(item, base);
      return;
    }
    if (!isNode(node) || typeof node === "boolean") return;
    if (node !== this.#root && typeof node.$id === "string") {
      if (node.$id.startsWith("#")) this.#anchors.set(base + node.$id, node);
      else {
        base = withoutFragment(absolute(node.$id, base));
        this.#resources.set(base, node);
      }
    }
    for (const key of ["$anchor", "$dynamicAnchor"]) {
      if (typeof node[key] === "string") this.#anchors.set(`${base}#${node[key]}`, node);
    }
    const dynamic = node.$dynamicAnchor;
    if (typeof dynamic === "string") {
      const named = this.#dynamic.get(dynamic);
      if (named) named.push(node);
      else this.#dynamic.set(dynamic, [node]);
    }
    if (node.$recursiveAnchor === true && node !== this.#root) this.#recursive.push(node);
    this.#bases.set(node, base);
    for (const key in node) {
      const value = node[key];
      // A map's keys are names (a property may be called `enum`), its values schemas.
      if (SCHEMA_MAPS.has(key)) {
        if (isNode(value) && typeof value !== "boolean") {
          for (const sub of Object.values(value)) this.#index(sub, base);
        }
      } else if (!NOT_SCHEMAS.has(key)) this.#index(value, base);
    }
  }
}

/** A JSON pointer segment unescaped; undefined when its percent-encoding is broken. */
function unescape(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment).replaceAll("~1", "/").replaceAll("~0", "~");
  } catch {
    return undefined;
  }
}

function absolute(ref: string, base: string): string {
  try {
    return new URL(ref, base).href;
  } catch {
    return `${base}#invalid`;
  }
}

function withoutFragment(url: string): string {
  const hash = url.indexOf("#");
  return hash < 0 ? url : url.slice(0, hash);
}

function isNode(value: unknown): value is SchemaNode {
  return typeof value === "boolean" ||
    (value !== null && typeof value === "object" && !Array.isArray(value));
}
