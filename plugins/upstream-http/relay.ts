/**
 * The body of an HTTP relay worker (shared by upstream-http and upstream-sse): one SDK client
 * transport between the worker's message port and the upstream URL. No `Client` here: the
 * kernel's Client speaks MCP through WorkerTransport; this only moves JSON-RPC messages.
 * @module
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { KernelToWorker, WorkerStartSpec, WorkerToKernel } from "../../core/plugin_api/mod.ts";
import { settlesWithin, systemClock } from "../../core/plugin_api/clock.ts";
import { RelayCredit } from "../../core/plugin_api/relay_credit.ts";
import { heldFetch, OpenStreams, type ResponseHold } from "./held_fetch.ts";
import { requestIdOfMessage, takeStreamMark } from "./related_streams.ts";

/** How a relay builds and judges its SDK transport. */
export interface HttpRelayOptions {
  /**
   * The SDK client transport for the upstream URL, sending `headers` on every request, its
   * requests made with `fetch` (which connects through the start spec's egress proxy, if any).
   */
  create(url: URL, headers: Record<string, string>, fetch: typeof globalThis.fetch): Transport;
  /** Whether an error the transport reports on its own (not from a send) ends the session. */
  isFatal(error: Error): boolean;
  /**
   * The `_meta` key under which the transport's fetch marks a message with the request whose
   * response stream carried it (see related_streams.ts); the relay takes the mark off and reports
   * it as the message's `related` request.
   */
  streamMarkKey?: string;
}

/** The parts of the worker global scope a relay uses (the project lib is deno.window). */
interface WorkerScope {
  onmessage: ((event: MessageEvent) => void) | null;
  postMessage(message: WorkerToKernel): void;
}

/** Installs the relay as this worker's message handler. */
export function runHttpRelay(options: HttpRelayOptions): void {
  const scope = globalThis as unknown as WorkerScope;
  // Every post spends credit; event streams are read on only while some is left (held_fetch.ts).
  const credit = new RelayCredit();
  const streams = new OpenStreams();
  const post = (message: WorkerToKernel) => {
    credit.spend(message);
    scope.postMessage(message);
  };
  let transport: Transport | undefined;
  let spec: WorkerStartSpec | undefined;
  let started = false;
  let finished = false;

  /** Closes the SDK transport and reports `closed` once. */
  const finish = async (reason: string) => {
    if (finished) return;
    finished = true;
    // Streams waiting for credit read on to their end or cancellation: the kernel returns none now.
    credit.close();
    await transport?.close().catch(() => {});
    post({ type: "closed", reason });
  };

  const start = async (startSpec: WorkerStartSpec) => {
    if (transport) return;
    spec = startSpec;
    const hold = holdFor(startSpec, credit, streams, post);
    const base = startSpec.egressProxy === undefined ? fetch : proxiedFetch(startSpec.egressProxy);
    const t = options.create(
      new URL(startSpec.url ?? ""),
      startSpec.headers ?? {},
      heldFetch(hold, base),
    );
    transport = t;
    t.onmessage = (message: JSONRPCMessage) => {
      post(toKernel(message, startSpec.maxMessageBytes, options.streamMarkKey));
      // Answered: its stream has nothing more to carry (the server should have closed it).
      if (isResponse(message)) streams.end(message.id);
    };
    t.onerror = (error: Error) => {
      // During start the rejected start() reports it; after finish nothing is relayed.
      if (!started || finished) return;
      if (options.isFatal(error)) {
        void finish(`connection to ${startSpec.url} lost: ${error.message}`);
      } else {
        post({ type: "error", error: { code: "upstream_error", message: error.message } });
      }
    };
    // A transport that fails its start closes itself first (the SDK's SSE transport on a hostile
    // endpoint event): the rejection says why, so a close before the start settles waits for it.
    let closedEarly = false;
    t.onclose = () => {
      if (started) void finish("the connection closed");
      else closedEarly = true;
    };
    try {
      await t.start();
    } catch (error) {
      await finish(`cannot connect to ${startSpec.url}: ${describe(error)}`);
      return;
    }
    if (closedEarly) {
      await finish("the connection closed");
      return;
    }
    started = true;
    post({ type: "started" });
  };

  const send = async (message: unknown) => {
    if (!transport || finished) return;
    try {
      await transport.send(message as JSONRPCMessage, sendOptions(message, streams));
      // Cancelled: no answer is coming that the kernel would take, so its stream is let go.
      const cancelled = cancelledRequest(message);
      if (cancelled !== undefined) streams.end(cancelled);
    } catch (error) {
      // The request will never be answered: end the session so the client fails fast and the
      // kernel can reconnect, instead of waiting for a timeout.
      await finish(`request to ${spec?.url} failed: ${describe(error)}`);
    }
  };

  const stop = async (graceMs: number) => {
    if (finished) return;
    // Streamable HTTP: end the session on the server (DELETE), bounded by the grace period.
    const session = transport as { terminateSession?: () => Promise<void> } | undefined;
    if (session?.terminateSession) {
      await settlesWithin(systemClock, graceMs, session.terminateSession());
    }
    await finish("stopped");
  };

  scope.onmessage = (event) => {
    const message = event.data as KernelToWorker | null;
    if (typeof message === "string") {
      for (const frame of message.split("\n")) void send(JSON.parse(frame));
      return;
    }
    switch (message?.type) {
      case "start":
        void start(message.spec);
        break;
      case "setProtocolVersion":
        transport?.setProtocolVersion?.(message.version);
        break;
      case "stop":
        void stop(message.graceMs);
        break;
      case "credit":
        credit.refund(message.cost);
        break;
    }
  };
}

/** How the relay's fetch holds and bounds responses: by its credit, to the message bound. */
function holdFor(
  spec: WorkerStartSpec,
  credit: RelayCredit,
  streams: OpenStreams,
  post: (message: WorkerToKernel) => void,
): ResponseHold {
  return {
    whenOpen: () => credit.whenOpen(),
    maxBytes: spec.maxMessageBytes + FRAMING_BYTES,
    // A cut answer fails its request now (the kernel answers it), or is reported when it had none.
    cut: (reason, id) =>
      post({ type: "malformed", reason, preview: "", ...(id === undefined ? {} : { id }) }),
    streams,
  };
}

/** What the kernel is sent for an upstream's message: it, or, past the bound, why it was dropped. */
function toKernel(
  message: JSONRPCMessage,
  maxMessageBytes: number,
  markKey: string | undefined,
): WorkerToKernel {
  // The SDK has parsed it already; the bound keeps one huge message from reaching the kernel.
  const text = JSON.stringify(message);
  const size = text.length;
  if (size > maxMessageBytes) {
    return {
      type: "malformed",
      reason: `message of ${size} bytes exceeds the limit of ${maxMessageBytes} bytes`,
      preview: text.slice(0, 200),
      ...(isResponse(message) ? { id: (message as { id: string | number }).id } : {}),
    };
  }
  const related = markKey === undefined ? undefined : takeStreamMark(message, markKey);
  // Its size is its credit cost, which the kernel reads back from the message.
  return { type: "message", message, size, ...(related === undefined ? {} : { related }) };
}

/**
 * What a message's bytes on the wire may hold beyond its JSON's limit: an SSE event's field
 * names and line ends, a body's whitespace. The message itself is held to the limit once parsed.
 */
const FRAMING_BYTES = 64 * 1024;

/**
 * A fetch whose every connection goes through the SOCKS5 proxy at `url`. The client lives as
 * long as the worker: the worker ends with its upstream.
 */
function proxiedFetch(url: string): typeof fetch {
  const client = Deno.createHttpClient({ proxy: { transport: "socks5", url } });
  return (input, init) => fetch(input, { ...init, client });
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A request's send options: the SDK says where it would resume the request's stream, so a stream
 * the relay let go is not resumed (held_fetch.ts).
 */
function sendOptions(message: unknown, streams: OpenStreams) {
  const request = requestIdOfMessage(message);
  return request === undefined
    ? undefined
    : { onresumptiontoken: (eventId: string) => streams.resumableAt(request, eventId) };
}

/** The request id a `notifications/cancelled` names, else undefined. */
function cancelledRequest(message: unknown): string | number | undefined {
  const m = message as { method?: unknown; params?: { requestId?: unknown } } | null;
  if (m?.method !== "notifications/cancelled") return undefined;
  const id = m.params?.requestId;
  return typeof id === "string" || typeof id === "number" ? id : undefined;
}

/** A response (never a request from the upstream) whose id can be answered. */
function isResponse(message: JSONRPCMessage): message is JSONRPCMessage & { id: string | number } {
  const m = message as { id?: unknown; method?: unknown };
  return m.method === undefined && (typeof m.id === "string" || Number.isSafeInteger(m.id));
}
