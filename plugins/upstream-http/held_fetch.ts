/**
 * What an HTTP upstream's responses may cost the gateway. The SDK's client transports read an
 * event stream as fast as it comes and a JSON body whole before parsing it, so without this an
 * upstream streaming notifications without end queued them in the kernel without bound, and one
 * answering with an endless body or event grew the relay's memory for as long as it sent. This
 * fetch sits under them:
 * - an event stream is read on only while the kernel has taken what the relay posted (its
 *   credit, core/plugin_api/relay_credit.ts), so a flood waits in the upstream's TCP window;
 * - one event, and any other body, is read to at most `maxBytes`; past that it is cut, and the
 *   request it answered (when there is one) is failed at once by `cut`, not left to time out;
 * - a POST's event stream, or its JSON answer still being read, is ended once its request is
 *   answered or cancelled ({@link OpenStreams}): MCP says the server closes it then, and one that
 *   keeps it open (a comment now and then) would otherwise hold a connection per call ever made;
 *   the SDK's resumption of such a stream (a GET at its last event id) is refused unsent.
 * @module
 */
import { readBoundedBody } from "../../core/plugin_api/bounded_body.ts";
import { requestIdOf } from "./related_streams.ts";
import { EventEnds } from "./sse_event_splitter.ts";

/** How a relay holds and bounds its upstream's responses. */
export interface ResponseHold {
  /** Undefined while the relay may read on; else a promise of when it may. */
  whenOpen(): Promise<void> | undefined;
  /** Largest event or body read, in bytes. */
  maxBytes: number;
  /** A response was cut for its size: `id` names the request it answered, when one did. */
  cut(reason: string, id: string | number | undefined): void;
  /** The POST responses being read, which the relay ends by their request's id. */
  streams: OpenStreams;
}

/** The responses to POSTed requests still being read, by the id of the request each answers. */
export class OpenStreams {
  /** Each one's end (stops reading), and the last event id the SDK read on its stream. */
  readonly #open = new Map<string | number, { end: () => void; lastEventId?: string }>();
  /**
   * The last event ids of streams let go. The SDK resumes a POST stream that ends unanswered
   * with a GET carrying its last event id, which a server can hold open as it held the stream;
   * such a resumption is refused (405, which the SDK takes as "no stream here").
   */
  readonly #letGo = new Set<string>();

  /** Registers the response to request `id`; the function returned forgets it. */
  add(id: string | number, end: () => void): () => void {
    const entry = { end };
    this.#open.set(id, entry);
    return () => {
      if (this.#open.get(id) === entry) this.#open.delete(id);
    };
  }

  /** The SDK read event `eventId` on request `id`'s stream (its `onresumptiontoken`). */
  resumableAt(id: string | number, eventId: string): void {
    const entry = this.#open.get(id);
    if (entry) entry.lastEventId = eventId;
  }

  /** Stops reading the response to request `id` (answered or cancelled), if one is open. */
  end(id: string | number): void {
    const entry = this.#open.get(id);
    this.#open.delete(id);
    entry?.end();
    if (entry?.lastEventId === undefined) return;
    this.#letGo.add(letGoKey(entry.lastEventId));
    if (this.#letGo.size > MAX_LET_GO) this.#letGo.delete(this.#letGo.values().next().value!);
  }

  /** Whether a GET resuming at `lastEventId` would resume a stream let go (asked once). */
  resumesLetGo(lastEventId: string): boolean {
    return this.#letGo.delete(letGoKey(lastEventId));
  }

  /** How many are open. */
  get size(): number {
    return this.#open.size;
  }
}

/** Streams let go whose resumption is still refused; older ones are forgotten. */
const MAX_LET_GO = 1024;
/** Characters of an event id kept to know its resumption again. */
const LET_GO_ID_CHARS = 256;

/**
 * How a let-go stream's last event id is remembered: whole when short, else by its length and
 * head, so 1,024 ids of an event's size (the upstream chooses them) cannot hold gigabytes. Two
 * ids alike in both are this upstream's own (the relay serves one), so a mix-up refuses only
 * its own resumption.
 */
function letGoKey(eventId: string): string {
  return eventId.length <= LET_GO_ID_CHARS
    ? eventId
    : `${eventId.length}:${eventId.slice(0, LET_GO_ID_CHARS)}`;
}

/** Statuses whose responses cannot carry a body (a Response with one cannot be built). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** A fetch whose responses are read as {@link ResponseHold} allows. */
export function heldFetch(hold: ResponseHold, base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const resumeAt = init?.method === "GET" ? new Headers(init.headers).get("last-event-id") : null;
    if (resumeAt !== null && hold.streams.resumesLetGo(resumeAt)) {
      return new Response(null, { status: 405 });
    }
    const response = await base(input, init);
    if (!response.body || NULL_BODY.has(response.status)) return response;
    const id = init?.method === "POST" ? requestIdOf(init.body) : undefined;
    const type = response.headers.get("content-type") ?? "";
    const events = /^\s*text\/event-stream\s*(;|$)/i.test(type);
    // A body the SDK only cancels (a 202, an answer to no request) is left to it as it came.
    if (!events && response.ok && (response.status === 202 || id === undefined)) return response;
    const body = events
      ? heldEvents(response.body, hold, id)
      : await boundedBody(response, hold, id);
    if (body === undefined) return new Response(null, { status: 202 });
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/**
 * An event stream read only while the relay holds credit, cut at an event past the bound: a POST's
 * stream then ends (its request is failed by `cut`); any other stream errors, which the SDK
 * reports and reconnects as it does a dropped connection.
 */
function heldEvents(
  body: ReadableStream<Uint8Array>,
  hold: ResponseHold,
  id: string | number | undefined,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const ends = new EventEnds();
  /** Bytes of the event now being read, before this chunk. */
  let open = 0;
  // Ending cancels the upstream's side: a pending read returns done, and the stream closes.
  const forget = id === undefined
    ? () => {}
    : hold.streams.add(id, () => void reader.cancel().catch(() => {}));
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const wait = hold.whenOpen();
      if (wait) await wait;
      const { done, value } = await reader.read();
      if (done) {
        forget();
        return controller.close();
      }
      let largest = 0;
      let from = 0;
      ends.scan(value, (at) => {
        largest = Math.max(largest, open + at - from);
        open = 0;
        from = at;
      });
      open += value.length - from;
      if (Math.max(largest, open) <= hold.maxBytes) return controller.enqueue(value);
      forget();
      await reader.cancel().catch(() => {});
      const reason = `an event of more than ${hold.maxBytes} bytes`;
      hold.cut(reason, id);
      if (id === undefined) controller.error(new Error(`the upstream sent ${reason}`));
      else controller.close();
    },
    cancel: (reason) => {
      forget();
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/**
 * The whole body when it is within the bound; undefined once cut, or once the request it answers
 * is ended (cancelled: nothing waits for the rest of a body that trickles).
 */
async function boundedBody(
  response: Response,
  hold: ResponseHold,
  id: string | number | undefined,
): Promise<Uint8Array<ArrayBuffer> | undefined> {
  const tooLarge = new Error(`a body of more than ${hold.maxBytes} bytes`);
  const ended = new Error("ended");
  const abort = new AbortController();
  const forget = id === undefined ? () => {} : hold.streams.add(id, () => abort.abort(ended));
  try {
    return (await readBoundedBody(response, hold.maxBytes, () => tooLarge, abort.signal)) ??
      undefined;
  } catch (error) {
    if (error === ended) return undefined;
    if (error !== tooLarge) throw error;
    hold.cut(tooLarge.message, id);
    return undefined;
  } finally {
    forget();
  }
}
