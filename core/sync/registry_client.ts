/**
 * Reads an MCP registry: every page of `GET /v0.1/servers` from a URL, or one saved response from
 * a file. Anything that is not the registry's shape is an error that names the source and the fix;
 * a single malformed server is skipped with a reason instead, so one bad entry cannot stop a sync.
 * @module
 */
import { fileURLToPath } from "node:url";
import { type Clock, deadline, systemClock } from "../support/clock.ts";
import { readBoundedBody } from "../support/bounded_body.ts";
import { redactCut } from "../support/redact.ts";
import {
  OFFICIAL_META,
  type RegistryServer,
  type RegistryStatus,
  type ServerDetail,
} from "./registry_types.ts";

/** A registry that could not be read; nothing was changed. */
export class RegistryError extends Error {
  override readonly name = "RegistryError";
}

/** What to ask the registry for. */
export interface RegistryQuery {
  search?: string;
  /** RFC 3339 time: only servers updated since (an incremental sync). */
  updatedSince?: string;
  /** Page size (default 100). */
  limit?: number;
  /** Per-request timeout in milliseconds (default 30 000). */
  timeoutMs?: number;
  /** Stops the whole read. */
  signal?: AbortSignal;
  /** Injectable for tests. */
  fetch?: typeof fetch;
  readTextFile?: (path: string) => Promise<string>;
  /** Times each request; the real clock by default. */
  clock?: Clock;
}

/** A listing: the servers read, and the entries skipped with why. */
export interface RegistryListing {
  servers: RegistryServer[];
  skipped: { name: string; version?: string; reason: string }[];
}

// A registry that keeps handing out cursors must not loop forever, nor answer without end.
const MAX_PAGES = 1000;
const MAX_PAGE_BYTES = 16 * 1024 * 1024;
const MAX_TOTAL_BYTES = 128 * 1024 * 1024;

/** Reads every page of the registry at `source` (an http(s) URL or a file path). */
export async function readRegistry(
  source: string,
  query: RegistryQuery = {},
): Promise<RegistryListing> {
  const listing: RegistryListing = { servers: [], skipped: [] };
  if (!/^https?:\/\//i.test(source)) {
    const read = query.readTextFile ?? Deno.readTextFile;
    let text: string;
    try {
      // A saved page is a path or a file:// URL.
      text = await read(/^file:/i.test(source) ? fileURLToPath(source) : source);
    } catch (error) {
      throw new RegistryError(
        `Cannot read registry file "${source}": ${
          describe(error)
        }; pass --registry a URL or a saved /v0.1/servers response`,
      );
    }
    parsePage(text, source, listing);
    return listing;
  }
  const base = serversUrl(source);
  const doFetch = query.fetch ?? fetch;
  let cursor: string | undefined;
  let total = 0;
  for (let page = 0; page < MAX_PAGES; page++) {
    const url = new URL(base);
    url.searchParams.set("limit", String(query.limit ?? 100));
    if (cursor !== undefined) url.searchParams.set("cursor", cursor);
    if (query.search) url.searchParams.set("search", query.search);
    if (query.updatedSince) url.searchParams.set("updated_since", query.updatedSince);
    const limit = deadline(query.clock ?? systemClock, query.timeoutMs ?? 30_000);
    const signal = query.signal ? AbortSignal.any([query.signal, limit.signal]) : limit.signal;
    let text: string;
    try {
      const response = await doFetch(url, { signal, headers: { accept: "application/json" } });
      text = await boundedText(response, url, MAX_PAGE_BYTES);
      total += text.length;
      if (total > MAX_TOTAL_BYTES) {
        throw new RegistryError(
          `Registry ${base} sent more than ${
            MAX_TOTAL_BYTES / 1024 / 1024
          } MiB in all; nothing was changed, narrow it with --search or --include`,
        );
      }
      if (!response.ok) {
        throw new RegistryError(
          `Registry ${url} answered ${response.status} ${response.statusText}: ${
            redactCut(text, 200)
          }; nothing was changed, try again later or check --registry`,
        );
      }
    } catch (error) {
      if (error instanceof RegistryError) throw error;
      if (limit.passed) {
        throw new RegistryError(
          `Registry ${url} did not answer within ${
            query.timeoutMs ?? 30_000
          } ms; nothing was changed, check the URL or raise --timeout`,
        );
      }
      throw new RegistryError(
        `Cannot reach registry ${url}: ${describe(error)}; nothing was changed, check --registry`,
      );
    } finally {
      limit.cancel();
    }
    cursor = parsePage(text, String(url), listing);
    if (cursor === undefined || cursor === "") return listing;
  }
  throw new RegistryError(
    `Registry ${base} returned more than ${MAX_PAGES} pages; narrow it with --search`,
  );
}

/** The body as text, refused once it passes `max` bytes (read no further). */
async function boundedText(response: Response, url: URL, max: number): Promise<string> {
  const body = await readBoundedBody(response, max, () =>
    new RegistryError(
      `Registry ${url} answered with a page larger than ${
        max / 1024 / 1024
      } MiB; nothing was changed, lower the page size or check --registry`,
    ));
  return body === null ? "" : new TextDecoder().decode(body);
}

/** The servers endpoint of a registry base URL (`https://registry.modelcontextprotocol.io`). */
export function serversUrl(source: string): string {
  const url = new URL(source);
  if (!/\/v0(\.\d+)?\/servers\/?$/.test(url.pathname)) {
    url.pathname = url.pathname.replace(/\/$/, "") + "/v0.1/servers";
  }
  return String(url);
}

/** Adds one page's servers to `listing`; returns the next cursor. */
function parsePage(text: string, where: string, listing: RegistryListing): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new RegistryError(
      `Registry ${where} did not return JSON (${describe(error)}); nothing was changed, ` +
        "check that --registry points at an MCP registry (GET /v0.1/servers)",
    );
  }
  if (!isObject(body) || !Array.isArray(body.servers)) {
    throw new RegistryError(
      `Registry ${where} did not return { servers: [...] }; nothing was changed, ` +
        "check that --registry points at an MCP registry (GET /v0.1/servers)",
    );
  }
  for (const item of body.servers) {
    const parsed = parseServer(item);
    if ("reason" in parsed) listing.skipped.push(parsed);
    else listing.servers.push(parsed);
  }
  const metadata = isObject(body.metadata) ? body.metadata : {};
  // The API says nextCursor; older registries and mirrors say next_cursor.
  const next = metadata.nextCursor ?? metadata.next_cursor;
  return typeof next === "string" ? next : undefined;
}

function parseServer(
  item: unknown,
): RegistryServer | { name: string; version?: string; reason: string } {
  // The v0.1 shape wraps the detail in `server`; a bare ServerDetail is accepted too.
  const detail = isObject(item) && isObject(item.server) ? item.server : item;
  if (!isObject(detail) || typeof detail.name !== "string" || typeof detail.version !== "string") {
    return {
      name: isObject(detail) && typeof detail.name === "string" ? detail.name : "(unnamed)",
      reason: "not a ServerDetail: it needs a string name and version",
    };
  }
  const meta = isObject(item) && isObject(item._meta) && isObject(item._meta[OFFICIAL_META])
    ? item._meta[OFFICIAL_META]
    : {};
  const status = meta.status ?? "active";
  if (status !== "active" && status !== "deprecated" && status !== "deleted") {
    return {
      name: detail.name,
      version: detail.version,
      reason: `unknown registry status "${String(status)}"`,
    };
  }
  const server: RegistryServer = {
    server: detail as unknown as ServerDetail,
    status: status as RegistryStatus,
  };
  if (typeof meta.updatedAt === "string") server.updatedAt = meta.updatedAt;
  if (typeof meta.isLatest === "boolean") server.isLatest = meta.isLatest;
  return server;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
