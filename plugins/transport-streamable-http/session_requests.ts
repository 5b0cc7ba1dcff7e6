/**
 * The parts of a Streamable HTTP request the transport reads before the SDK does: the path's
 * upstream, the bounded body, and the ids whose answers have left.
 * @module
 */
import { isRequestId, type SessionStage } from "../../core/plugin_api/mod.ts";
import type { DirectRequests } from "./direct_requests.ts";

/** `/mcp` → undefined; `/mcp/<server_id>` → the id; anything else → null. */
export function upstreamOf(pathname: string): string | undefined | null {
  if (pathname === "/mcp") return undefined;
  const id = decodeURIComponent(pathname.slice("/mcp/".length));
  return /^[a-z0-9][a-z0-9_-]*$/.test(id) ? id : null;
}

/** The body as text, or undefined past `max` bytes. */
export async function readLimited(
  request: Request,
  max: number,
  read: Uint8Array | null | undefined,
): Promise<string | undefined> {
  // The listener reads this route's bodies (bounded, with a deadline); an in-process caller may not.
  const bytes = read ?? new Uint8Array(await request.arrayBuffer());
  return bytes.length > max ? undefined : decoder.decode(bytes);
}

const decoder = new TextDecoder();

/**
 * The session's stage after its direct requests: forgets a request id once its response leaves
 * (so the id may be reused), and runs `closed` when the transport closes.
 */
export function trackResponses(
  inFlight: Set<string | number>,
  closed: () => void,
): SessionStage {
  return {
    send(message, options, next) {
      if ("id" in message && ("result" in message || "error" in message)) {
        inFlight.delete(message.id as string | number);
      }
      return next(message, options);
    },
    closed,
  };
}

/** The ids of the requests (not notifications or responses) in a POST body. */
export function requestIds(body: unknown): (string | number)[] {
  return (Array.isArray(body) ? body : [body]).flatMap((m) =>
    m && typeof m === "object" && "method" in m && "id" in m &&
      (typeof m.id === "string" || typeof m.id === "number")
      ? [m.id as string | number]
      : []
  );
}

/**
 * A request the client cancelled gets no answer: without this its id would stay in flight (the
 * session never idle) and a direct request's waiter and HTTP response would be held forever.
 */
export function forgetCancelled(
  inFlight: Set<string | number>,
  direct: DirectRequests,
  body: unknown,
): void {
  for (const m of Array.isArray(body) ? body : [body]) {
    if (m?.method !== "notifications/cancelled") continue;
    const id = m.params?.requestId;
    if (isRequestId(id) && inFlight.delete(id)) direct.cancel(id);
  }
}
