/**
 * `GET /v1/events` (scope `admin` or `operator`): the bus as a Server-Sent Events stream. An
 * operator of one tenant (without `all_tenants`) gets only the events of its tenant's sessions,
 * calls and approvals: the rest belong to other tenants or to the whole gateway.
 *
 * Each event is one frame, `event: <type>` and `data: <the event as JSON>`. The stream opens with a
 * `retry:` hint and an `event: stream.open` frame, and sends a `: keep-alive` comment every 15 s so
 * proxies keep it open. It ends when the client goes away (the bus subscription goes with it) and
 * when the gateway stops (after forwarding `gateway.stopping`), so shutdown never waits on it.
 *
 * Credentials come only from the `Authorization` header, like every other route: the dashboard
 * reads the stream with `fetch()` rather than `EventSource`, so no token ever appears in a URL
 * (URLs end up in logs, history and `Referer` headers).
 *
 * A slow reader cannot grow memory: the stream follows the socket's backpressure and holds at most
 * `maxQueue` undelivered frames. When more arrive the oldest are dropped and the next frame
 * delivered is `event: stream.overflow` with `data: {"dropped": n}`, so the client knows to
 * re-read state instead of trusting the event trail.
 * @module
 */
import { refuseScope } from "./admin_scope.ts";
import { reachesAllTenants } from "../auth/token_payload.ts";
import type { Clock, TimerHandle } from "../support/clock.ts";
import type { EventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import type { HttpRoute } from "../http/http_route.ts";

/** The path of the events stream. */
export const EVENTS_PATH = "/v1/events";

/** What the events stream reads, and its limits. */
export interface EventsStreamOptions {
  bus: EventBus;
  clock: Clock;
  /** Milliseconds between keep-alive comments; default 15 000. */
  keepAliveMs?: number;
  /** The client's reconnection delay sent as `retry:`, in milliseconds; default 3000. */
  retryMs?: number;
  /** Most frames held for a slow reader before the oldest are dropped; default 256. */
  maxQueue?: number;
}

const encoder = new TextEncoder();

/** One SSE frame for a named event with a JSON payload. */
export function sseFrame(type: string, data: unknown): string {
  // JSON.stringify never emits raw newlines, so the payload is always a single data: line.
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** The `GET /v1/events` route over a bus. */
export function eventsStreamRoute(options: EventsStreamOptions): HttpRoute {
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  const retryMs = options.retryMs ?? 3000;
  const maxQueue = Math.max(1, options.maxQueue ?? 256);
  return {
    path: EVENTS_PATH,
    methods: ["GET"],
    handle(_request, auth) {
      const refused = refuseScope(auth, "observe", EVENTS_PATH);
      if (refused) return Promise.resolve(refused);
      const tenant = reachesAllTenants(auth) ? undefined : auth.tenant;
      // A client that goes away cancels the body: that, not request.signal, ends the stream.
      const body = openStream({ ...options, keepAliveMs, retryMs, maxQueue }, tenant);
      return Promise.resolve(
        new Response(body, {
          headers: {
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache, no-store, no-transform",
            "X-Accel-Buffering": "no",
          },
        }),
      );
    },
  };
}

/** Whether an event is `tenant`'s to see: only events that name it (undefined: every event). */
function visibleTo(event: GatewayEvent, tenant: string | undefined): boolean {
  return tenant === undefined || ("tenant" in event && event.tenant === tenant);
}

/** The stream of the bus's events, those of `tenant` only when it is given. */
function openStream(
  options: Required<EventsStreamOptions>,
  tenant: string | undefined,
): ReadableStream<Uint8Array> {
  const pending: string[] = [];
  let dropped = 0;
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let unsubscribe: (() => void) | undefined;
  let keepAlive: TimerHandle | undefined;
  let ended = false;

  const end = () => {
    if (ended) return;
    ended = true;
    unsubscribe?.();
    keepAlive?.cancel();
    pending.length = 0;
  };
  /** Moves frames to the response while the socket is taking them. */
  const flush = (force = false) => {
    while ((force || (controller.desiredSize ?? 0) > 0) && (dropped > 0 || pending.length > 0)) {
      if (dropped > 0) {
        controller.enqueue(encoder.encode(sseFrame("stream.overflow", { dropped })));
        dropped = 0;
        continue;
      }
      controller.enqueue(encoder.encode(pending.shift()!));
    }
  };
  const push = (frame: string) => {
    if (ended) return;
    pending.push(frame);
    if (pending.length > options.maxQueue) {
      pending.shift();
      dropped++;
    }
    flush();
  };
  const scheduleKeepAlive = () => {
    keepAlive = options.clock.setTimeout(() => {
      if (ended) return;
      // Only when idle: a backed-up stream is not idle, and a comment would just take a slot.
      if (pending.length === 0) push(": keep-alive\n\n");
      scheduleKeepAlive();
    }, options.keepAliveMs);
  };

  return new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      push(
        `retry: ${options.retryMs}\n` +
          sseFrame("stream.open", { keepAliveMs: options.keepAliveMs, maxQueue: options.maxQueue }),
      );
      unsubscribe = options.bus.subscribe((event: GatewayEvent) => {
        if (event.type !== "gateway.stopping" && !visibleTo(event, tenant)) return;
        push(sseFrame(event.type, event));
        if (event.type === "gateway.stopping") {
          // The listener's shutdown waits for open responses: hand over what is left and end.
          flush(true);
          end();
          controller.close();
        }
      });
      scheduleKeepAlive();
    },
    pull() {
      if (!ended) flush();
    },
    cancel() {
      end();
    },
  }, { highWaterMark: 8 });
}
