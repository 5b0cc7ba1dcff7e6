/**
 * The session gate: the one place every session's requests pass on their way in, for admission,
 * the in-flight bound, shutdown refusals, draining and cut-off.
 *
 * Each admitted session gets a stage of the session pipeline that watches its requests at the
 * transport: it refuses requests past MCP_MAX_IN_FLIGHT_PER_SESSION, and while the gateway stops
 * new ones with `shutting_down` (stdio has no listener to refuse them at). What it sees awaiting an
 * answer is the gateway's one count of calls in flight: a stop waits for those `tools/call`s to be
 * answered, up to MCP_SHUTDOWN_GRACE_MS, and answers what is left with `shutting_down`.
 * @module
 */
import type {
  Transport,
  TransportSendOptions,
} from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { type Clock, settlesWithin } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import type { SessionInfo } from "../plugin_api/mod.ts";
import type {
  MessageExtra,
  Receive,
  Send,
  SessionStage,
  StageLink,
} from "../plugin_api/session_stage.ts";
import { InFlight } from "../support/in_flight.ts";
import { SessionAdmission, type SessionLimits, tooManyRequestsError } from "./session_admission.ts";

/** The gate's bounds, from the server settings. */
export interface SessionGateLimits extends SessionLimits {
  /** MCP_MAX_IN_FLIGHT_PER_SESSION: requests one session may keep unanswered. */
  maxInFlightPerSession: number;
  /** MCP_SHUTDOWN_GRACE_MS: how long a stop waits for tool calls in flight. */
  shutdownGraceMs: number;
}

/**
 * The listener in front of HTTP sessions: it refuses new requests itself once a stop begins, and
 * tells of those it took before, which the drain waits for even when they reach a session late
 * (a body still arriving, a session record still being read).
 */
export interface DrainDoor {
  readonly requestsInFlight: number;
  requestsSettled(): Promise<void>;
}

/** How often the drain looks whether a second signal asked to stop at once. */
const DRAIN_SLICE_MS = 100;
/** How long cut-off answers get to reach the wire before the transports close. */
const FLUSH_MS = 1_000;

/** One admitted session's stage: its requests awaiting their response, seen at its transport. */
export class GatedSession implements SessionStage {
  /** Request id → method. */
  readonly pending = new Map<string | number, string>();
  readonly #gate: SessionGate;
  readonly #info: SessionInfo;
  readonly #transport: Transport;
  readonly #release: () => void;
  #link: StageLink | undefined;
  /** Refusals past the bound are logged once per session. */
  #refusing = false;

  constructor(gate: SessionGate, info: SessionInfo, transport: Transport, release: () => void) {
    this.#gate = gate;
    this.#info = info;
    this.#transport = transport;
    this.#release = release;
  }

  attach(link: StageLink): void {
    this.#link = link;
  }

  /** Frees the session's admission (it failed to start, or closed); safe to call again. */
  release(): void {
    this.#release();
  }

  receive(message: JSONRPCMessage, extra: MessageExtra | undefined, next: Receive): void {
    const m = message as { id?: unknown; method?: unknown; params?: { requestId?: unknown } };
    if (typeof m.method === "string" && (typeof m.id === "string" || typeof m.id === "number")) {
      if (this.#gate.closing) {
        this.#refuse(m.id, {
          code: ErrorCode.ConnectionClosed,
          message: "The gateway is shutting down and takes no new requests; retry once it is back",
          data: { code: "shutting_down" },
        });
        return;
      }
      // Every transport's requests enter here: one bound on what a session may keep waiting.
      const max = this.#gate.limits.maxInFlightPerSession;
      if (this.pending.size >= max) {
        if (!this.#refusing) {
          this.#gate.logger.warn(
            `refused a request past MCP_MAX_IN_FLIGHT_PER_SESSION (${max}): the session ` +
              "keeps that many unanswered (further refusals on this session are not logged)",
            {
              session: this.#info.sessionId ?? this.#transport.sessionId,
              tenant: this.#info.auth.tenant,
              transport: this.#info.transport,
            },
          );
        }
        this.#refusing = true;
        this.#refuse(m.id, tooManyRequestsError(max));
        return;
      }
      this.pending.set(m.id, m.method);
      if (m.method === "tools/call") this.#gate.callStarted();
    } else if (m.method === "notifications/cancelled") {
      // A cancelled request gets no answer: it must not hold a drain.
      const id = m.params?.requestId;
      if (typeof id === "string" || typeof id === "number") this.answered(id);
    }
    next(message, extra);
  }

  send(
    message: JSONRPCMessage,
    options: TransportSendOptions | undefined,
    next: Send,
  ): Promise<void> {
    const m = message as { id?: unknown; method?: unknown };
    // Notifications and requests to the client (a call's progress floods) pass straight through.
    if (m.method !== undefined || (typeof m.id !== "string" && typeof m.id !== "number")) {
      return next(message, options);
    }
    const id = m.id;
    // Only once the transport has taken the answer: closing it sooner can lose it.
    return next(message, options).finally(() => this.answered(id));
  }

  closed(): void {
    this.#release();
    this.#gate.forget(this);
    for (const id of [...this.pending.keys()]) this.answered(id);
  }

  /** Sends an answer past this stage (toward the transport); never throws. */
  reply(message: JSONRPCMessage): Promise<void> {
    return (this.#link?.send(message) ?? Promise.resolve()).catch(() => {});
  }

  /** Forgets request `id` (answered, cancelled or the session gone). */
  answered(id: string | number): void {
    const method = this.pending.get(id);
    if (method === undefined) return;
    this.pending.delete(id);
    if (method === "tools/call") this.#gate.callEnded();
  }

  #refuse(id: string | number, error: { code: number; message: string; data?: unknown }): void {
    void this.reply({ jsonrpc: "2.0", id, error });
  }
}

/** Admits sessions, bounds their requests, and drains them when the gateway stops. */
export class SessionGate {
  readonly limits: SessionGateLimits;
  readonly logger: Logger;
  readonly #admission: SessionAdmission;
  readonly #sessions = new Set<GatedSession>();
  /** `tools/call` requests received and not yet answered, across every session. */
  readonly #calls = new InFlight();
  #closing = false;
  #immediate = false;

  readonly #clock: Clock;

  constructor(limits: SessionGateLimits, logger: Logger, clock: Clock) {
    this.limits = limits;
    this.logger = logger;
    this.#clock = clock;
    this.#admission = new SessionAdmission(limits);
  }

  /**
   * Admits one session of `info`'s tenant, or throws `session_limit` naming the limit; returns
   * its stage for the session pipeline.
   */
  admit(info: SessionInfo, transport: Transport): GatedSession {
    const release = this.#admission.admit(info.auth.tenant);
    const session = new GatedSession(this, info, transport, release);
    this.#sessions.add(session);
    return session;
  }

  /** Tool calls received and not yet answered, across every session: the gateway's one count. */
  get inFlightCalls(): number {
    return this.#calls.count;
  }

  /** Whether a stop has begun: new requests are refused. */
  get closing(): boolean {
    return this.#closing;
  }

  /**
   * A stop begins with no listener in front (stdio): every new request is refused with
   * `shutting_down` from now on. Behind a listener, the drain refuses them once it is over.
   */
  refuseNew(): void {
    this.#closing = true;
  }

  /** A second signal: a drain in progress gives up waiting. */
  cutShort(): void {
    this.#immediate = true;
  }

  /**
   * Waits for tool calls in flight and for the requests `door` took before the stop, up to the
   * grace (or until a second signal), then refuses every new request and answers every one still
   * waiting with a `shutting_down` error so their clients are not left guessing.
   */
  async drain(door?: DrainDoor): Promise<void> {
    const graceMs = this.limits.shutdownGraceMs;
    const inFlight = this.#calls.count;
    const taken = door?.requestsInFlight ?? 0;
    if (inFlight === 0 && taken === 0) {
      this.#closing = true;
      // Other requests (a prompt or resource read forwarded upstream) are not waited for.
      const cut = await this.#cutOff(graceMs);
      this.logger.info(
        "stopping: no tool calls in flight" +
          (cut > 0 ? `; ${cut} other request(s) answered with shutting_down` : ""),
      );
      return;
    }
    this.logger.warn(
      `stopping: waiting up to ${graceMs} ms for ${inFlight} tool call(s) in flight` +
        (taken > 0 ? ` and ${taken} HTTP request(s) taken before the stop` : "") +
        " (MCP_SHUTDOWN_GRACE_MS); send the signal again to stop at once",
    );
    const deadline = performance.now() + graceMs;
    // In slices, so a second signal takes effect at once and no timer outlives the stop.
    while (!this.#immediate) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      if (await this.#idleWithin(Math.min(left, DRAIN_SLICE_MS), door)) break;
    }
    this.#closing = true;
    const running = this.#calls.count;
    const cut = await this.#cutOff(graceMs);
    const how = this.#immediate ? "stopped at once by a second signal" : `grace of ${graceMs} ms`;
    if (running === 0) {
      this.logger.info(`stopping: all ${inFlight} tool call(s) in flight finished`);
    } else {
      this.logger.warn(
        `stopping: ${inFlight - running} tool call(s) finished, ${running} cut off (${how}); ` +
          `${cut} request(s) answered with shutting_down`,
      );
    }
  }

  /** @internal A session's tool call arrived. */
  callStarted(): void {
    this.#calls.enter();
  }

  /** @internal A session's tool call was answered, cancelled or dropped with its session. */
  callEnded(): void {
    this.#calls.leave();
  }

  /** @internal The session closed. */
  forget(session: GatedSession): void {
    this.#sessions.delete(session);
  }

  /** Resolves true once no tool call (nor request `door` took) is in flight, false after `timeoutMs`. */
  async #idleWithin(timeoutMs: number, door: DrainDoor | undefined): Promise<boolean> {
    const idle = () => this.#calls.count === 0 && (door?.requestsInFlight ?? 0) === 0;
    if (idle()) return true;
    await settlesWithin(
      this.#clock,
      timeoutMs,
      Promise.all([this.#calls.idle(), door?.requestsSettled()]),
    );
    // A request the door took may have started a call as it settled: look again.
    return idle();
  }

  /** Answers every request still waiting with a `shutting_down` error; returns how many. */
  async #cutOff(graceMs: number): Promise<number> {
    const sends: Promise<void>[] = [];
    for (const session of this.#sessions) {
      for (const [id, method] of session.pending) {
        sends.push(
          session.reply({
            jsonrpc: "2.0",
            id,
            error: {
              code: ErrorCode.ConnectionClosed,
              message: `The gateway shut down before this ${method} finished` +
                (this.#immediate
                  ? " (stopped at once by a second signal)"
                  : ` (still running after the ${graceMs} ms grace, MCP_SHUTDOWN_GRACE_MS)`) +
                "; it may or may not have taken effect upstream: check before retrying",
              data: { code: "shutting_down", graceMs },
            },
          }).finally(() => session.answered(id)),
        );
      }
    }
    // Written before the transports close; bounded, since a client that stopped reading
    // (a full stdout pipe) must not hold the stop.
    await settlesWithin(this.#clock, FLUSH_MS, Promise.all(sends));
    return sends.length;
  }
}
