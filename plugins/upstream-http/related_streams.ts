/**
 * Which request a Streamable HTTP upstream's server→client message belongs to: a server sends a
 * request's own sampling, elicitation and log messages on that request's POST response stream,
 * so the stream a message arrives on names its call. The SDK's client transport does not say
 * which stream a message came from, so this fetch marks each message on a POST's event stream
 * with the POSTed request's id, under a `_meta` key holding a nonce the upstream cannot know;
 * the relay takes the mark off again ({@link takeStreamMark}) and reports it beside the message.
 * @module
 */
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { sseEventSplitter } from "./sse_event_splitter.ts";

/** A random `_meta` key for this relay's marks. */
export function streamMarkKey(): string {
  return `agent33.dev/stream-of:${crypto.randomUUID()}`;
}

/** A fetch that marks the messages of each POST's event-stream response with its request's id. */
export function markingFetch(key: string, base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const response = await base(input, init);
    if (init?.method !== "POST" || !response.body) return response;
    const type = response.headers.get("content-type") ?? "";
    if (!/^\s*text\/event-stream\s*(;|$)/i.test(type)) return response;
    const id = requestIdOf(init.body);
    if (id === undefined) return response;
    const marked = response.body.pipeThrough(
      sseEventSplitter((event) => markEvent(event, key, id), MARK_LIMIT_BYTES),
    );
    return new Response(marked, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/** Removes this relay's mark from a message in place; the request id it named, or undefined. */
export function takeStreamMark(message: unknown, key: string): string | number | undefined {
  const params = (message as { params?: unknown } | null)?.params;
  const meta = isRecord(params) ? params._meta : undefined;
  if (!isRecord(meta) || !Object.hasOwn(meta, key)) return undefined;
  const related = meta[key];
  delete meta[key];
  if (Object.keys(meta).length === 0) delete (params as Record<string, unknown>)._meta;
  return typeof related === "string" || typeof related === "number" ? related : undefined;
}

/** The id of the JSON-RPC request a POST body holds (the SDK posts one message per request). */
export function requestIdOf(body: BodyInit | null | undefined): string | number | undefined {
  if (typeof body !== "string") return undefined;
  try {
    return requestIdOfMessage(JSON.parse(body));
  } catch {
    return undefined;
  }
}

/** The id of a request (not a notification or a response), else undefined. */
export function requestIdOfMessage(message: unknown): string | number | undefined {
  const m = message as { id?: unknown; method?: unknown } | null;
  if (typeof m?.method !== "string") return undefined;
  return typeof m.id === "string" || typeof m.id === "number" ? m.id : undefined;
}

/** The messages whose recipient the mark decides (progress is routed by its token). */
const MARKED_METHODS = [
  "sampling/createMessage",
  "elicitation/create",
  "roots/list",
  "notifications/message",
];
const QUOTED_METHODS = MARKED_METHODS.map((method) => `"${method}"`);
/**
 * Larger events pass unmarked (a response of many megabytes is neither decoded nor parsed here);
 * an unmarked message falls back to the gateway's rule for uncorrelated ones, which never
 * misdelivers.
 */
const MARK_LIMIT_BYTES = 4 * 1024 * 1024;
const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** One event's bytes with its message marked, or undefined to pass it as it came. */
function markEvent(bytes: Uint8Array, key: string, id: string | number): Uint8Array | undefined {
  const text = decoder.decode(bytes);
  // Cheap test first: most events are responses and progress, which pass untouched.
  if (!QUOTED_METHODS.some((m) => text.includes(m))) return undefined;
  const events: EventSourceMessage[] = [];
  let retry: number | undefined;
  const parser = createParser({
    onEvent: (event) => void events.push(event),
    onRetry: (ms) => void (retry = ms),
  });
  parser.feed(text);
  // The splitter hands over one whole event, empty line included; the flush is for safety.
  parser.reset({ consume: true });
  let out = retry === undefined ? "" : `retry: ${retry}\n\n`;
  for (const event of events) out += frame(event.id, event.event, mark(event.data, key, id));
  return encoder.encode(out);
}

/** The event's data, with the mark added when it is one of {@link MARKED_METHODS}. */
function mark(data: string, key: string, id: string | number): string {
  let message: unknown;
  try {
    message = JSON.parse(data);
  } catch {
    return data; // not JSON: the SDK reports it as it would have
  }
  if (!isRecord(message) || !MARKED_METHODS.includes(message.method as string)) return data;
  const params = isRecord(message.params) ? message.params : {};
  const meta = isRecord(params._meta) ? params._meta : {};
  return JSON.stringify({ ...message, params: { ...params, _meta: { ...meta, [key]: id } } });
}

/** One SSE event, as the parser gave it. */
function frame(id: string | undefined, event: string | undefined, data: string): string {
  let out = "";
  if (id !== undefined) out += `id: ${id}\n`;
  if (event !== undefined) out += `event: ${event}\n`;
  for (const line of data.split("\n")) out += `data: ${line}\n`;
  return `${out}\n`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
