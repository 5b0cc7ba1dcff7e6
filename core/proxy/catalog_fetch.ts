/**
 * Reads an upstream's catalog (tools, resources, resource templates, prompts) within bounds.
 *
 * An upstream is outside the trust boundary: one that answers `tools/list` with an endless
 * `nextCursor` grew the heap ~45 MB/s until the gateway died. So the read stops at a page count,
 * an item count per list, a byte total, and one deadline (the same one as the handshake,
 * `timeouts.connect`); going over any of them is a {@link CatalogLimitError} naming the bound,
 * and the upstream goes FAILED. A single descriptor over its own bounds (name, description,
 * schema size or depth) is dropped with a reason naming the bound, and the rest are kept.
 * @module
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  type Prompt,
  PromptSchema,
  type Resource,
  ResourceSchema,
  type ResourceTemplate,
  ResourceTemplateSchema,
  type Tool,
  ToolSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { Clock } from "../support/clock.ts";
import { quoteOutside } from "../support/outside_text.ts";

/** What the upstream advertises, refreshed on its list_changed notifications. */
export interface UpstreamCatalog {
  tools: Tool[];
  resources: Resource[];
  resourceTemplates: ResourceTemplate[];
  prompts: Prompt[];
}

/** The bounds of one upstream's catalog (`limits:` of a fleet entry). */
export interface CatalogLimits {
  /** Pages per list (`limits.pages`). */
  pages: number;
  /** Items per list: tools, resources, templates or prompts (`limits.items`). */
  items: number;
  /** UTF-8 bytes of one description (`limits.description_bytes`). */
  descriptionBytes: number;
  /** UTF-8 bytes of one tool's input and output schemas, or of one other descriptor (`limits.schema_bytes`). */
  schemaBytes: number;
  /** Nesting depth of one schema (`limits.schema_depth`). */
  schemaDepth: number;
  /** UTF-8 bytes of the whole kept catalog (`limits.catalog_bytes`). */
  catalogBytes: number;
}

/** The defaults: room for any realistic server, none for a hostile one. */
export const DEFAULT_CATALOG_LIMITS: CatalogLimits = {
  pages: 100,
  items: 10_000,
  descriptionBytes: 16 * 1024,
  // Compiling a schema costs the main thread ~5 ms per KB at worst (ajv's code for 1,500
  // properties in 59 KB took 300 ms); the largest of 670 real tools' schemas measured is 6.2 KB.
  schemaBytes: 16 * 1024,
  schemaDepth: 32,
  catalogBytes: 32 * 1024 * 1024,
};

/** The longest tool name accepted, from an upstream or a client (MCP's 128, plus a prefix). */
export const MAX_TOOL_NAME = 128;

/** Longest name a client may call: a prefix, a separator and a tool name. */
export const MAX_CALLED_NAME = 256;

const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** An upstream's catalog went over a bound; the message names it. */
export class CatalogLimitError extends Error {
  override readonly name = "CatalogLimitError";
  /** The bound, as the fleet file spells it (`limits.pages`, `timeouts.connect`, …). */
  readonly bound: string;

  constructor(bound: string, message: string) {
    super(message);
    this.bound = bound;
  }
}

/** What {@link fetchCatalog} needs. */
export interface CatalogFetchOptions {
  /** The upstream's id, for messages. */
  server: string;
  limits: CatalogLimits;
  /** The absolute time (on `clock`) by which the whole catalog must be read. */
  deadline: number;
  /** Per-request timeout (`timeouts.call`), never past the deadline. */
  callMs: number;
  clock: Clock;
  /**
   * Called for each descriptor dropped, with a reason naming the bound; `name` is the plain name
   * when it is a valid one, else quoted with escapes and cut to 80 characters.
   */
  onDrop(
    kind: "tool" | "resource" | "resource template" | "prompt",
    name: string,
    reason: string,
  ): void;
}

const LENIENT_PAGE = (key: string) =>
  z.looseObject({ [key]: z.array(z.unknown()), nextCursor: z.string().optional() });

/** Reads every list the upstream's capabilities announce, within `options.limits`. */
export async function fetchCatalog(
  client: Client,
  options: CatalogFetchOptions,
): Promise<UpstreamCatalog> {
  const caps = client.getServerCapabilities() ?? {};
  const remaining = options.deadline - options.clock.now();
  const controller = new AbortController();
  const timer = options.clock.setTimeout(() => controller.abort(), Math.max(0, remaining));
  if (remaining <= 0) controller.abort();
  const budget = { bytes: 0 };
  const read = <T>(
    method: string,
    key: string,
    kind: Parameters<CatalogFetchOptions["onDrop"]>[0],
    check: (raw: unknown) => { item: T; size: number } | { drop: string; name: string },
  ) => readList(client, method, key, kind, check, options, controller.signal, budget);
  try {
    const tools = caps.tools ? await read("tools/list", "tools", "tool", toolCheck(options)) : [];
    const small = otherCheck(options);
    const resources = caps.resources
      ? await read<Resource>("resources/list", "resources", "resource", small(ResourceSchema))
      : [];
    const resourceTemplates = caps.resources
      ? await read<ResourceTemplate>(
        "resources/templates/list",
        "resourceTemplates",
        "resource template",
        small(ResourceTemplateSchema),
      )
      : [];
    const prompts = caps.prompts
      ? await read<Prompt>("prompts/list", "prompts", "prompt", small(PromptSchema))
      : [];
    return { tools, resources, resourceTemplates, prompts };
  } catch (error) {
    if (controller.signal.aborted && !(error instanceof CatalogLimitError)) {
      throw new CatalogLimitError(
        "timeouts.connect",
        `Upstream "${options.server}" did not complete the handshake and its catalog within ` +
          `timeouts.connect (${Math.round(remaining)} ms left of it for the catalog); ` +
          "check the server, or raise timeouts.connect",
      );
    }
    throw error;
  } finally {
    timer.cancel();
  }
}

async function readList<T>(
  client: Client,
  method: string,
  key: string,
  kind: Parameters<CatalogFetchOptions["onDrop"]>[0],
  check: (raw: unknown) => { item: T; size: number } | { drop: string; name: string },
  options: CatalogFetchOptions,
  signal: AbortSignal,
  budget: { bytes: number },
): Promise<T[]> {
  const { limits, server } = options;
  const items: T[] = [];
  const schema = LENIENT_PAGE(key);
  let cursor: string | undefined;
  for (let page = 1;; page++) {
    if (page > limits.pages) {
      throw new CatalogLimitError(
        "limits.pages",
        `Upstream "${server}" kept paging ${method} past limits.pages (${limits.pages} pages); ` +
          "raise limits.pages for this server if it really has that many",
      );
    }
    signal.throwIfAborted();
    // A little past the deadline: at the deadline itself the abort (and its named error) wins.
    const left = options.deadline - options.clock.now() + 50;
    const timeout = Math.max(1, Math.min(options.callMs, left));
    const result = await client.request(
      { method, params: cursor === undefined ? {} : { cursor } } as never,
      schema,
      { timeout, signal },
    );
    // Lenient page schema: one malformed item must not hide the server's others.
    const raws = result[key] as unknown[];
    if (items.length + raws.length > limits.items) {
      throw new CatalogLimitError(
        "limits.items",
        `Upstream "${server}" lists more than limits.items (${limits.items}) in ${method}; ` +
          "raise limits.items for this server if it really has that many",
      );
    }
    for (const raw of raws) {
      const checked = check(raw);
      if ("drop" in checked) {
        options.onDrop(kind, checked.name, checked.drop);
        continue;
      }
      budget.bytes += checked.size;
      if (budget.bytes > limits.catalogBytes) {
        throw new CatalogLimitError(
          "limits.catalog_bytes",
          `Upstream "${server}"'s catalog is larger than limits.catalog_bytes ` +
            `(${limits.catalogBytes} bytes); raise it for this server if that is expected`,
        );
      }
      items.push(checked.item);
    }
    const next = result.nextCursor;
    if (typeof next !== "string" || next === "") return items;
    cursor = next;
  }
}

/** The checks of one tool descriptor, in order of cost: name, depth, sizes, then shape. */
function toolCheck(options: CatalogFetchOptions) {
  const { limits } = options;
  return (raw: unknown): { item: Tool; size: number } | { drop: string; name: string } => {
    const rawName = (raw as { name?: unknown } | null)?.name;
    const name = typeof rawName === "string" && TOOL_NAME.test(rawName)
      ? rawName
      : quoteOutside(String(rawName ?? "(unnamed)"));
    if (typeof rawName !== "string" || !TOOL_NAME.test(rawName)) {
      return { name, drop: `its name is not 1–${MAX_TOOL_NAME} letters, digits, _, - or .` };
    }
    const tool = raw as { description?: unknown; inputSchema?: unknown; outputSchema?: unknown };
    for (const field of ["inputSchema", "outputSchema"] as const) {
      if (depthOver(tool[field], limits.schemaDepth)) {
        return {
          name,
          drop: `its ${field} nests deeper than limits.schema_depth (${limits.schemaDepth})`,
        };
      }
    }
    if (typeof tool.description === "string") {
      const bytes = utf8Length(tool.description);
      if (bytes > limits.descriptionBytes) {
        return {
          name,
          drop: `its description is ${bytes} bytes, over limits.description_bytes ` +
            `(${limits.descriptionBytes})`,
        };
      }
    }
    const schemaBytes = utf8Length(JSON.stringify(tool.inputSchema ?? null)) +
      utf8Length(JSON.stringify(tool.outputSchema ?? null));
    if (schemaBytes > limits.schemaBytes) {
      return {
        name,
        drop:
          `its schemas are ${schemaBytes} bytes, over limits.schema_bytes (${limits.schemaBytes})`,
      };
    }
    const parsed = ToolSchema.safeParse(raw);
    if (!parsed.success) return { name, drop: z.prettifyError(parsed.error) };
    const schema = parsed.data.inputSchema as { type?: unknown } | undefined;
    if (!schema || typeof schema !== "object" || schema.type !== "object") {
      return { name, drop: 'its inputSchema is not a JSON Schema of type "object"' };
    }
    return { item: parsed.data, size: utf8Length(JSON.stringify(raw)) };
  };
}

/** The checks of a resource, template or prompt: depth and size as a whole, then shape. */
function otherCheck(options: CatalogFetchOptions) {
  const { limits } = options;
  return <T>(schema: z.ZodType<T>) =>
  (raw: unknown): { item: T; size: number } | { drop: string; name: string } => {
    const rawName = (raw as { name?: unknown; uri?: unknown } | null)?.name;
    const name = typeof rawName === "string" && TOOL_NAME.test(rawName)
      ? rawName
      : quoteOutside(String(rawName ?? "(unnamed)"));
    if (depthOver(raw, limits.schemaDepth)) {
      return { name, drop: `it nests deeper than limits.schema_depth (${limits.schemaDepth})` };
    }
    const size = utf8Length(JSON.stringify(raw));
    if (size > limits.schemaBytes + limits.descriptionBytes) {
      return {
        name,
        drop: `it is ${size} bytes, over limits.schema_bytes + limits.description_bytes ` +
          `(${limits.schemaBytes + limits.descriptionBytes})`,
      };
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) return { name, drop: z.prettifyError(parsed.error) };
    return { item: parsed.data, size };
  };
}

/** Whether `value` nests objects or arrays deeper than `max` (walked without recursion). */
function depthOver(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (typeof node !== "object" || node === null) continue;
    if (depth >= max) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}

/** UTF-8 length of `text` without encoding it. */
function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code < 0xdc00) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}
