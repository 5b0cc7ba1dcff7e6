/**
 * What checking arguments against a JSON Schema can cost, bounded before ajv runs: an upstream
 * writes the schema and a caller the arguments, and together they could hold the main thread for
 * seconds (`anyOf` 100 shapes × 500,000 records: 3.7 s) or for ever (`$ref`s that each name the
 * next twice double the work per level), stalling every tenant.
 *
 * The bound is static, found once per schema and path: the set of schema nodes that can apply to
 * one value and how many times (`allOf: [{$ref: d}, {$ref: d}]` applies `d` twice; a property
 * meets the `properties` entry its name selects, every pattern's, and the in-place branches of
 * each), interned as a state with the states of its properties and items looked up by name or
 * index. Each node weighs its own keywords (a `required` of 1,000 names costs 1,000, an `enum`
 * its values, a `pattern` each character of the text). The work of one call is the sum over the
 * arguments' values of their states' weights: an upper bound on what ajv does, which stops at the
 * first error and at an `anyOf`'s first match and so mostly does less.
 * @module
 */
import { countValues } from "./json_size.ts";
import { linearPattern } from "./linear_pattern.ts";
import { NOT_SCHEMAS, type SchemaNode, SchemaRefs } from "./schema_refs.ts";

/** In-place applicators holding one subschema: they apply to the same value. */
const IN_PLACE_ONE = ["not", "if", "then", "else"];
/** In-place applicators holding a list of subschemas. */
const IN_PLACE_LIST = ["allOf", "anyOf", "oneOf"];
/** References: in place, to wherever they point. */
const REFERENCES = ["$ref", "$dynamicRef", "$recursiveRef"] as const;
/** Applicators holding one subschema for the value's items, properties or property names. */
const CHILD_ONE = [
  "additionalProperties",
  "propertyNames",
  "additionalItems",
  "contains",
  "unevaluatedItems",
  "unevaluatedProperties",
];
/** Applicators holding a map of subschemas for the value's properties. */
const CHILD_MAP = ["properties", "patternProperties"];
type Node = SchemaNode;

/** Schema nodes with how many times each applies to one value. */
type Applied = Map<Node, number>;

/**
 * The most work checking one call's arguments may take by default (MCP_MAX_SCHEMA_WORK): about
 * 0.1 s of the main thread, which every session shares.
 */
export const MAX_SCHEMA_WORK = 10_000_000;

/** The object nodes applied in place, whose keywords for properties and items apply below. */
type Parts = Map<Record<string, unknown>, number>;

/** A node as it applies to a value: its own and its in-place subschemas' keywords. */
interface Expansion {
  /** What its keywords and those of everything it applies in place cost one value. */
  readonly weight: number;
  /** The object nodes it applies in place (itself included), whose children apply below. */
  readonly parts: Parts;
}

/** Stands for a reference this cannot follow (a meta-schema ajv knows): costly, at every depth. */
const UNKNOWN: Record<string, unknown> = {};
const UNKNOWN_WEIGHT = 1_000;

/**
 * A unit of work is ~10 ns of ajv on this machine's class at the worst measured (`anyOf`
 * branches: 6 ns; deep-equal `enum`: 8 ns): a pattern's test has a fixed cost (re2js: up to 600
 * ns for a short text), a `format` a smaller one.
 */
const PATTERN_TEST = 60;
const FORMAT_TEST = 5;

/**
 * What each character of a text costs a pattern run over it: re2js steps ~50 ns a character
 * (`^[a-z]+$`), plus ~0.18 ns for each instruction of the program ([a-z]{1000}: 1,002).
 */
function charCost(pattern: unknown): number {
  if (typeof pattern !== "string") return 0;
  let cost = charCosts.get(pattern);
  if (cost === undefined) {
    try {
      cost = 5 + linearPattern(pattern).programSize / 50;
    } catch {
      cost = 5; // ajv refuses the schema: it is never run
    }
    if (charCosts.size >= 5_000) charCosts.clear();
    charCosts.set(pattern, cost);
  }
  return cost;
}
const charCosts = new Map<string, number>();

/**
 * Node entries the states of one schema may hold in all before the table starts again (~50 bytes
 * each): a hostile schema reaches many states, each a set of up to every node it has.
 */
const MAX_STATE_ENTRIES = 100_000;

/**
 * Node entries of states and expansions kept between calls (~100 KB): a real schema's fit (tens
 * of states of a few nodes each); larger ones are dropped after each walk, so thousands of cached
 * hostile schemas cannot each keep megabytes (a chain of 500 nodes each applying the rest in
 * place expands to 125,000 entries).
 */
const KEPT_ENTRIES = 2_000;

/**
 * The schema nodes that apply to one value, interned: what they cost the value, and the states
 * of its properties and items, found once per name or index and then looked up.
 */
class State {
  /** What checking one value in this state costs, before its properties. */
  readonly weight: number;
  /** What each of the value's properties costs it (patterns tested, `propertyNames`). */
  readonly perProperty: number;
  /** What each character of the value's property names costs (patterns run over them). */
  readonly perKeyChar: number;
  /** What each character of the value costs when it is a string (`pattern`, `format`). */
  readonly perChar: number;
  readonly parts: Parts;
  /** No node applies: a value here costs nothing, nor does anything inside it. */
  readonly empty: boolean;
  #names: Set<string> | undefined;
  readonly #named = new Map<string, State>();
  #other: State | undefined;
  readonly #items: State[] = [];
  #restItems: State | undefined;
  #prefix = -1;

  constructor(readonly cost: SchemaCost, costs: StateCosts, parts: Parts) {
    this.weight = costs.weight;
    this.perProperty = costs.perProperty;
    this.perKeyChar = costs.perKeyChar;
    this.perChar = costs.perChar;
    this.parts = parts;
    this.empty = parts.size === 0 && costs.weight === 0;
  }

  /** The state of the property `name` of a value in this state. */
  property(name: string): State {
    this.#names ??= namesOf(this.parts);
    if (!this.#names.has(name)) return this.#other ??= this.cost.state(propertyNodes(this.parts));
    let state = this.#named.get(name);
    if (state === undefined) {
      state = this.cost.state(propertyNodes(this.parts, name));
      this.#named.set(name, state);
    }
    return state;
  }

  /** The state of item `index` of an array in this state. */
  item(index: number): State {
    if (this.#prefix < 0) this.#prefix = prefixLength(this.parts);
    if (index >= this.#prefix) return this.#restItems ??= this.cost.state(itemNodes(this.parts));
    return this.#items[index] ??= this.cost.state(itemNodes(this.parts, index));
  }
}

/** What a state costs a value, by the value's parts. */
interface StateCosts {
  weight: number;
  perProperty: number;
  perKeyChar: number;
  perChar: number;
}

/** The static cost of checking values against one schema. */
export class SchemaCost {
  readonly #refs: SchemaRefs;
  readonly #expansions = new Map<Node, Expansion>();
  readonly #expanding = new Set<Node>();
  readonly #ids = new Map<Node, number>();
  readonly #states = new Map<string, State>();
  #stateEntries = 0;
  #expansionEntries = 0;
  readonly #schema: Node;
  #start: State | undefined;
  readonly #values: unknown[] = [];
  readonly #walking: State[] = [];

  constructor(schema: Node) {
    this.#schema = schema;
    this.#refs = new SchemaRefs(schema);
  }

  /** The state of the arguments object; made again after the table started again. */
  get #first(): State {
    return this.#start ??= this.state(new Map([[this.#schema, 1]]));
  }

  /** Node entries of the states and expansions kept now (what this holds between calls). */
  get keptEntries(): number {
    return this.#stateEntries + this.#expansionEntries;
  }

  /** What checking the arguments object itself costs, before any of its properties. */
  get perValue(): number {
    return this.#first.weight;
  }

  /**
   * The work of checking `value`: each of its values costs what the schema nodes that apply to it
   * do. It stops counting past `limit` (returning more than it), so a huge argument is not walked
   * to the end.
   */
  work(value: unknown, limit: number): number {
    let total = 0;
    // One walk at a time (it never yields): the stacks are reused, and left empty.
    const values = this.#values;
    const states = this.#walking;
    values.push(value);
    states.push(this.#first);
    while (values.length > 0) {
      const next = values.pop();
      const state = states.pop()!;
      total += state.weight;
      if (typeof next === "string") total += next.length * state.perChar;
      if (total > limit) {
        values.length = 0;
        states.length = 0;
        break;
      }
      if (next === null || typeof next !== "object") continue;
      if (Array.isArray(next)) {
        for (let i = 0; i < next.length; i++) {
          const item = state.item(i);
          // What no schema node applies to costs nothing, nor does anything inside it.
          if (item.empty) continue;
          values.push(next[i]);
          states.push(item);
        }
        continue;
      }
      const record = next as Record<string, unknown>;
      let properties = 0;
      const perKeyChar = state.perKeyChar;
      for (const key in record) {
        properties++;
        if (perKeyChar > 0) total += key.length * perKeyChar;
        const property = state.property(key);
        if (property.empty) continue;
        values.push(record[key]);
        states.push(property);
      }
      total += properties * state.perProperty;
    }
    if (this.#stateEntries + this.#expansionEntries > KEPT_ENTRIES) this.#forget();
    return total;
  }

  /**
   * Drops every state (those reached from the first hold each other, so it goes too) and every
   * expansion; both are found again when needed.
   */
  #forget(): void {
    this.#states.clear();
    this.#stateEntries = 0;
    this.#start = undefined;
    this.#expansions.clear();
    this.#expansionEntries = 0;
  }

  /** The interned state of the nodes `applied`. */
  state(applied: Applied): State {
    let key = "";
    const entries: [number, number][] = [];
    for (const [node, times] of applied) entries.push([this.#idOf(node), times]);
    entries.sort((a, b) => a[0] - b[0]);
    for (const [id, times] of entries) key += `${id}*${times},`;
    const known = this.#states.get(key);
    if (known) return known;
    const costs: StateCosts = { weight: 0, perProperty: 0, perKeyChar: 0, perChar: 0 };
    const parts: Parts = new Map();
    for (const [node, times] of applied) {
      const expansion = this.#expand(node);
      costs.weight += times * expansion.weight;
      for (const [part, n] of expansion.parts) add(parts, part, times * n);
    }
    for (const [part, times] of parts) {
      if (part === UNKNOWN) continue;
      costs.perChar += times *
        (charCost(part.pattern) + (typeof part.format === "string" ? 1 : 0));
      eachKey(part.patternProperties, (pattern) => {
        costs.perProperty += times * PATTERN_TEST;
        costs.perKeyChar += times * charCost(pattern);
      });
      if (isNode(part.propertyNames)) {
        const names = this.state(new Map([[part.propertyNames, 1]]));
        costs.perProperty += times * names.weight;
        costs.perKeyChar += times * names.perChar;
      }
    }
    const state = new State(this, costs, parts);
    // A hostile schema may make states without end (each count larger): start the table again.
    if (this.#stateEntries + parts.size + applied.size > MAX_STATE_ENTRIES) this.#forget();
    this.#stateEntries += parts.size + applied.size + 1;
    this.#states.set(key, state);
    return state;
  }

  #idOf(node: Node): number {
    let id = this.#ids.get(node);
    if (id === undefined) this.#ids.set(node, id = this.#ids.size);
    return id;
  }

  /** A node's expansion (memoized); a node that applies itself in place costs without end. */
  #expand(node: Node): Expansion {
    const known = this.#expansions.get(node);
    if (known) return known;
    if (node === UNKNOWN) return { weight: UNKNOWN_WEIGHT, parts: new Map([[UNKNOWN, 1]]) };
    if (typeof node === "boolean") return { weight: 1, parts: new Map() };
    if (this.#expanding.has(node)) return { weight: Infinity, parts: new Map() };
    this.#expanding.add(node);
    let weight = ownWeight(node);
    const parts: Parts = new Map([[node, 1]]);
    const inPlace = (sub: unknown) => {
      if (!isNode(sub)) return;
      const e = this.#expand(sub);
      weight += e.weight;
      for (const [part, n] of e.parts) add(parts, part, n);
    };
    for (const key of IN_PLACE_ONE) inPlace(node[key]);
    for (const key of IN_PLACE_LIST) eachOf(node[key], inPlace);
    for (const key of REFERENCES) {
      const ref = node[key];
      if (typeof ref !== "string") continue;
      inPlace(this.#refs.resolve(node, ref) ?? UNKNOWN);
      if (key !== "$ref") {
        for (const target of this.#refs.dynamicTargets(key, ref)) inPlace(target);
      }
    }
    eachValue(node.dependentSchemas, inPlace);
    eachValue(node.dependencies, inPlace);
    this.#expanding.delete(node);
    const expansion = { weight, parts };
    this.#expansions.set(node, expansion);
    this.#expansionEntries += parts.size;
    return expansion;
  }
}

/** The property names any of `parts` gives a subschema of its own. */
function namesOf(parts: Parts): Set<string> {
  const names = new Set<string>();
  for (const part of parts.keys()) {
    if (part !== UNKNOWN && isMap(part.properties)) {
      for (const name of Object.keys(part.properties)) names.add(name);
    }
  }
  return names;
}

/**
 * The nodes `parts` apply to a property called `name` (undefined: a name none of them lists):
 * its `properties` entry, else `additionalProperties`; every pattern's, since a name may match
 * any; `unevaluatedProperties`.
 */
function propertyNodes(parts: Parts, name?: string): Applied {
  const applied: Applied = new Map();
  for (const [part, times] of parts) {
    if (part === UNKNOWN) {
      add(applied, UNKNOWN, times);
      continue;
    }
    const listed = name !== undefined && isMap(part.properties) &&
        Object.hasOwn(part.properties, name)
      ? part.properties[name]
      : undefined;
    if (isNode(listed)) add(applied, listed, times);
    else if (isNode(part.additionalProperties)) add(applied, part.additionalProperties, times);
    eachValue(part.patternProperties, (sub) => isNode(sub) && add(applied, sub, times));
    if (isNode(part.unevaluatedProperties)) add(applied, part.unevaluatedProperties, times);
  }
  return applied;
}

/** How many leading items `parts` give subschemas by position (`prefixItems`, draft-07 `items`). */
function prefixLength(parts: Parts): number {
  let length = 0;
  for (const part of parts.keys()) {
    if (part === UNKNOWN) continue;
    for (const list of [part.prefixItems, part.items]) {
      if (Array.isArray(list)) length = Math.max(length, list.length);
    }
  }
  return length;
}

/** The nodes `parts` apply to item `index` (undefined: any item past every positional list). */
function itemNodes(parts: Parts, index = Infinity): Applied {
  const applied: Applied = new Map();
  for (const [part, times] of parts) {
    if (part === UNKNOWN) {
      add(applied, UNKNOWN, times);
      continue;
    }
    const apply = (sub: unknown) => {
      if (isNode(sub)) add(applied, sub, times);
    };
    if (Array.isArray(part.prefixItems)) {
      if (index < part.prefixItems.length) apply(part.prefixItems[index]);
      else apply(part.items);
    } else if (Array.isArray(part.items)) {
      if (index < part.items.length) apply(part.items[index]);
      else apply(part.additionalItems);
    } else apply(part.items);
    apply(part.contains);
    apply(part.unevaluatedItems);
  }
  return applied;
}

function isNode(value: unknown): value is Node {
  return typeof value === "boolean" ||
    (value !== null && typeof value === "object" && !Array.isArray(value));
}

function add<K>(into: Map<K, number>, node: K, times: number): void {
  into.set(node, (into.get(node) ?? 0) + times);
}

function eachOf(list: unknown, each: (node: unknown) => void): void {
  if (Array.isArray(list)) { for (const item of list) each(item); }
}

function isMap(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function eachKey(map: unknown, each: (key: string) => void): void {
  if (isMap(map)) { for (const key of Object.keys(map)) each(key); }
}

function eachValue(map: unknown, each: (node: unknown) => void): void {
  if (isMap(map)) { for (const value of Object.values(map)) each(value); }
}

/** Subschema-holding keywords: their subschemas are weighed where they apply, not here. */
const APPLICATORS = new Set([
  ...IN_PLACE_ONE,
  ...IN_PLACE_LIST,
  ...CHILD_ONE,
  ...CHILD_MAP,
  "items",
  "prefixItems",
  "dependentSchemas",
  "$defs",
  "definitions",
]);

/**
 * What a node's own keywords cost one value: 1 each, a subschema list or map its length (one check
 * per entry), data (`enum`, `const`, `required`, `dependentRequired`) the values it holds.
 */
function ownWeight(node: Record<string, unknown>): number {
  let weight = 1;
  for (const key in node) {
    const value = node[key];
    if (key === "$defs" || key === "definitions") continue;
    if (APPLICATORS.has(key)) {
      weight += Array.isArray(value)
        ? value.length
        : value !== null && typeof value === "object"
        ? Object.keys(value).length
        : 1;
    } else if (key === "dependencies") {
      // A list of names each present value requires, or a schema (weighed where it applies).
      for (const entry of Object.values(value ?? {})) {
        weight += Array.isArray(entry) ? entry.length : 1;
      }
    } else if (key === "pattern") {
      weight += PATTERN_TEST;
    } else if (key === "format") {
      weight += FORMAT_TEST;
    } else if (key === "enum") {
      // Compared by deep equality: ~2 units a value (measured).
      weight += 2 * countValues(value, 1_000_000);
    } else if (!NOT_SCHEMAS.has(key) || key === "const") {
      weight += countValues(value, 1_000_000);
    }
  }
  return weight;
}
