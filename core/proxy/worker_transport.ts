/**
 * WorkerTransport: the kernel's SDK `Transport` to one upstream server, relayed by that upstream's
 * own Deno worker.
 *
 * The SDK `Client` stays in the kernel; the worker holds only the upstream's connection and runs
 * with explicit permissions from the adapter's plan (every key set, nothing inherited). Nothing
 * the worker or the upstream does can take the gateway down: worker crashes are caught, every
 * message is checked (JSON-RPC payloads against the SDK schema) before the client sees it, and
 * close() ends the upstream's process group from the kernel when the worker could not.
 * @module
 */
import type {
  Transport,
  TransportSendOptions,
} from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { type Clock, settlesWithin, systemClock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import { isJsonRpcMessage } from "../support/jsonrpc_shape.ts";
import { LogRateWindow } from "../support/log_rate_window.ts";
import type { Logger } from "../support/logger.ts";
import { redactCut } from "../support/redact.ts";
import type { InlineRelay, PluginPermissions, UpstreamPlan } from "../plugin_api/mod.ts";
import { CreditReturn } from "../plugin_api/relay_credit.ts";
import { markRelated } from "./related_request.ts";
import { InlineRelayPort, type RelayPort } from "./inline_relay_port.ts";
import { type KernelToWorker, parseWorkerMessage, type WorkerToKernel } from "./worker_protocol.ts";

/** Options for {@link WorkerTransport}. */
export interface WorkerTransportOptions {
  /** Module URL of the adapter's relay worker. */
  workerUrl: string;
  /** The worker's permissions and start message, from the adapter's `plan()`. */
  plan: UpstreamPlan;
  /** The upstream's id, named in every error and log line. */
  serverId: string;
  logger: Logger;
  /** How long the worker may take to report `started`. */
  startTimeoutMs: number;
  /** How long the worker may take to stop its upstream before it is terminated; default 3000. */
  stopGraceMs?: number;
  /** Run this relay in the kernel's thread instead of a worker (`isolation: inline`). */
  inlineRelay?: InlineRelay;
  /** Times the start and the stop; the real clock by default. */
  clock?: Clock;
  /** Runs before the worker is made; its rejection is start()'s (the egress guard's check). */
  preflight?: () => Promise<void>;
}

/** Why and how the upstream connection ended. */
export interface WorkerCloseInfo {
  reason: string;
  code?: number | null;
  signal?: string | null;
}

/** Counters of what the transport dropped. */
export interface WorkerTransportStats {
  /** Worker `message` payloads that were not JSON-RPC 2.0. */
  invalidMessages: number;
  /** Frames the worker could not parse (not JSON, too large, bad UTF-8). */
  malformedFrames: number;
  /** Upstream stderr lines not logged because of the rate bound. */
  suppressedStderrLines: number;
}

/** Time the worker gets past `stopGraceMs` to finish its SIGKILL and report `closed`. */
const STOP_MARGIN_MS = 1000;
/** Upstream stderr lines logged per second at most; the rest are counted. */
const STDERR_LINES_PER_SECOND = 20;
/** Stderr lines kept for error messages. */
const STDERR_TAIL_LINES = 5;
/** Longest stderr line logged, in characters. */
const STDERR_LINE_CHARS = 2000;
/** How the stdio relay marks a stderr line it cut (plugins/upstream-stdio/relay.ts, stderr_digest.ts). */
const WORKER_CUT_MARK = /(?: … \(\d+ bytes, truncated\)|…)$/;

type State = "new" | "starting" | "open" | "closing" | "closed";

/** Worker permissions with every key explicit: unlisted ones are `false`, never "inherit". */
export function workerPermissions(permissions: PluginPermissions): Deno.PermissionOptionsObject {
  const grant = (value: boolean | string[] | undefined): boolean | string[] =>
    Array.isArray(value) ? (value.length > 0 ? [...value] : false) : value === true;
  return {
    env: grant(permissions.env),
    ffi: false,
    import: false,
    net: grant(permissions.net),
    read: grant(permissions.read),
    run: grant(permissions.run),
    sys: grant(permissions.sys),
    write: grant(permissions.write),
  };
}

/** An SDK `Transport` to one upstream through its sandboxed relay worker. */
export class WorkerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  readonly #options: WorkerTransportOptions;
  readonly #stopGraceMs: number;
  #state: State = "new";
  #worker: RelayPort | undefined;
  #pid: number | undefined;
  #closeInfo: WorkerCloseInfo | undefined;
  #starting: { resolve(): void; reject(error: Error): void } | undefined;
  /** Resolves when the worker has reported `closed` or died. */
  readonly #workerGone = Promise.withResolvers<void>();
  #shutdown: Promise<void> | undefined;
  readonly #stats: WorkerTransportStats = {
    invalidMessages: 0,
    malformedFrames: 0,
    suppressedStderrLines: 0,
  };
  readonly #stderrWindow: LogRateWindow;
  /** The last few stderr lines, for errors an operator can act on. */
  #stderrTail: string[] = [];
  /** Hands the relay back credit for what was taken, so it reads on (relay_credit.ts). */
  readonly #credit: CreditReturn;

  constructor(options: WorkerTransportOptions) {
    this.#options = options;
    this.#stopGraceMs = options.stopGraceMs ?? 3000;
    // The real clock: the return must wait for a turn of the real event loop, whatever clock
    // times this transport's start and stop (a test's clock may never run).
    this.#credit = new CreditReturn(systemClock, (cost) => this.#post({ type: "credit", cost }));
    this.#stderrWindow = new LogRateWindow(
      STDERR_LINES_PER_SECOND,
      options.clock ?? systemClock,
      (lines) =>
        options.logger.debug("upstream stderr lines suppressed", { server: this.#id, lines }),
    );
  }

  /** The upstream child's process id, once the worker has spawned it (stdio only). */
  get pid(): number | undefined {
    return this.#pid;
  }

  /** Why the connection ended, once it has. */
  get closeInfo(): WorkerCloseInfo | undefined {
    return this.#closeInfo;
  }

  /** How the upstream ended and its last stderr lines, for an error message; undefined if nothing is known. */
  diagnostics(): string | undefined {
    const parts: string[] = [];
    const info = this.#closeInfo;
    if (info?.code !== undefined && info.code !== null) parts.push(`exit code ${info.code}`);
    if (info?.signal) parts.push(`signal ${info.signal}`);
    // A relay without a process (http/sse) says why in its reason, e.g. "request to … failed".
    const exitKnown = parts.length > 0;
    if (!exitKnown && info?.reason && info.reason !== "closed" && info.reason !== "stopped") {
      parts.push(info.reason);
    }
    if (this.#stderrTail.length > 0) parts.push(`stderr: ${this.#stderrTail.join(" | ")}`);
    return parts.length > 0 ? parts.join("; ") : undefined;
  }

  /** What was dropped so far. */
  get stats(): Readonly<WorkerTransportStats> {
    return { ...this.#stats };
  }

  /** Creates the worker and resolves once it reports `started`; rejects with upstream_error or timeout. */
  start(): Promise<void> {
    if (this.#state !== "new") {
      return Promise.reject(new Error(`WorkerTransport for "${this.#id}" already started`));
    }
    this.#state = "starting";
    const preflight = this.#options.preflight;
    if (preflight === undefined) return this.#launch();
    return preflight().then(
      () =>
        this.#state === "starting" ? this.#launch() : this.#teardown(false).then(() => {
          throw this.#error("was closed before it started");
        }),
      (error) => {
        this.#workerGone.resolve();
        return this.#teardown(false).then(() => Promise.reject(error));
      },
    );
  }

  /** Creates the worker and sends it the start message. */
  #launch(): Promise<void> {
    const { workerUrl, plan, startTimeoutMs, inlineRelay } = this.#options;
    try {
      if (inlineRelay) {
        this.#worker = new InlineRelayPort(
          inlineRelay,
          (message) => this.#receive(message),
          (detail) => this.#crashed(detail),
        );
      } else {
        const worker = new Worker(workerUrl, {
          type: "module",
          name: `upstream:${this.#id}`,
          deno: { permissions: workerPermissions(plan.permissions) },
        });
        worker.onmessage = (event) => this.#receive(event.data);
        worker.onmessageerror = () =>
          this.#report(this.#error("sent a message that could not be read"));
        worker.onerror = (event) => {
          // Without preventDefault an uncaught error in the worker is rethrown in the gateway.
          event.preventDefault();
          this.#crashed(event.message);
        };
        this.#worker = worker;
      }
    } catch (error) {
      // E.g. a grant beyond the gateway's own permissions.
      const failure = this.#error(
        `cannot create its worker (${message(error)}); check the adapter's worker URL and that ` +
          "the gateway itself holds the permissions the upstream needs",
      );
      this.#workerGone.resolve();
      return this.#teardown(false).then(() => Promise.reject(failure));
    }
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    this.#starting = { resolve, reject };
    const timer = (this.#options.clock ?? systemClock).setTimeout(() => {
      this.#failStart(
        new GatewayError(
          "timeout",
          `Upstream "${this.#id}" did not start within ${startTimeoutMs} ms; check its command ` +
            "or URL, or raise its connect timeout (timeouts.connect) if it is slow to install",
          { server: this.#id },
        ),
        true,
      );
    }, startTimeoutMs);
    this.#post({ type: "start", spec: plan.start });
    return promise.finally(() => timer.cancel());
  }

  /** Relays a JSON-RPC message to the upstream. */
  send(message: JSONRPCMessage, _options?: TransportSendOptions): Promise<void> {
    if (this.#state !== "open") {
      return Promise.reject(
        this.#error(`is not connected (${this.#state}); reconnect it before sending`),
      );
    }
    // Frames sent in one turn cross to the worker as one message: a post is a cross-thread
    // wake-up (~30 µs under load), and 16 calls in flight often leave in the same turn.
    const text = JSON.stringify(message);
    if (this.#outbox === undefined) {
      this.#outbox = text;
      queueMicrotask(this.#flush);
    } else this.#outbox += "\n" + text;
    return Promise.resolve();
  }

  /** Frames queued this turn, newline-separated (JSON text has no raw newlines). */
  #outbox: string | undefined;

  readonly #flush = () => {
    const frames = this.#outbox;
    this.#outbox = undefined;
    if (frames !== undefined) this.#worker?.postMessage(frames);
  };

  /** Tells the worker the negotiated version (HTTP transports send it as MCP-Protocol-Version). */
  setProtocolVersion(version: string): void {
    if (this.#state === "starting" || this.#state === "open") {
      this.#post({ type: "setProtocolVersion", version });
    }
  }

  /** Stops the upstream, terminates the worker and ends the child's process group; idempotent. */
  close(): Promise<void> {
    return this.#teardown(true);
  }

  get #id(): string {
    return this.#options.serverId;
  }

  /** Posts a control message after the frames queued before it. */
  #post(message: KernelToWorker): void {
    this.#flush();
    this.#worker?.postMessage(message);
  }

  #receive(data: unknown): void {
    try {
      this.#handle(data);
    } finally {
      // Taken only once handled: the backlog a flood leaves stays within the relay's window.
      this.#credit.taken(data);
    }
  }

  #handle(data: unknown): void {
    const message = parseWorkerMessage(data);
    if (!message) {
      this.#report(this.#error("sent an unknown worker message; it was dropped"));
      return;
    }
    if (this.#state === "closed") return;
    if (typeof message === "string") return this.#frame(message);
    switch (message.type) {
      case "started":
        this.#started(message);
        break;
      case "message":
        this.#deliver(message.message, message.related);
        break;
      case "stderr":
        this.#stderr(message.line);
        break;
      case "malformed":
        this.#malformed(message.reason, message.preview);
        if (message.id !== undefined) this.#answerDropped(message.id, message.reason);
        break;
      case "closed":
        this.#closed(message);
        break;
      case "error": {
        const error = this.#error(String(message.error?.message ?? "unknown worker error"));
        if (this.#state === "starting") this.#failStart(error, true);
        else this.#report(error);
        break;
      }
      default: {
        const unreachable: never = message;
        void unreachable;
      }
    }
  }

  #started(message: Extract<WorkerToKernel, { type: "started" }>): void {
    if (typeof message.pid === "number") this.#pid = message.pid;
    if (this.#state !== "starting") return;
    this.#state = "open";
    const starting = this.#starting;
    this.#starting = undefined;
    this.#options.logger.debug("upstream started", { server: this.#id, pid: this.#pid });
    starting?.resolve();
  }

  /** Frames of text from the upstream, newline-separated: each JSON, or reported and dropped. */
  #frame(text: string): void {
    if (text.includes("\n")) {
      for (const line of text.split("\n")) this.#frame(line);
      return;
    }
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch (error) {
      return this.#malformed(`frame is not JSON: ${(error as Error).message}`, text);
    }
    this.#deliver(payload);
  }

  #malformed(reason: string, preview: string): void {
    this.#stats.malformedFrames++;
    this.#report(
      this.#error(
        `wrote a malformed frame (${reason}); it was dropped: ` +
          JSON.stringify(redactCut(String(preview), 200, true)),
      ),
    );
  }

  /**
   * The response to `id` was dropped (too large): its caller gets an error now rather than waiting
   * out its timeout for an answer that will never come.
   */
  #answerDropped(id: string | number, reason: string): void {
    const error = new GatewayError(
      "upstream_error",
      `Upstream "${this.#id}" answered with a message it could not relay (${reason}); ` +
        "ask for less (e.g. a smaller page) or raise MCP_MAX_MESSAGE_BYTES",
      { server: this.#id },
    );
    const { code, data } = error.toMcpError();
    this.#deliver({ jsonrpc: "2.0", id, error: { code, message: error.message, data } });
  }

  /** `related`: the request whose stream carried it, when the worker's transport could tell. */
  #deliver(payload: unknown, related?: string | number): void {
    // A structural check, not a zod parse: this runs for every upstream message.
    const parsed = isJsonRpcMessage(payload)
      ? { success: true as const, data: payload }
      : { success: false as const };
    if (!parsed.success) {
      this.#stats.invalidMessages++;
      this.#report(
        this.#error("sent a message that is not JSON-RPC 2.0; it was dropped", {
          preview: redactCut(safeJson(payload), 200),
        }),
      );
      return;
    }
    // Only the worker's word ties a message to a request: an upstream's own marker is removed.
    markRelated(
      parsed.data,
      typeof related === "string" || typeof related === "number" ? related : undefined,
    );
    try {
      this.onmessage?.(parsed.data);
    } catch (error) {
      this.onerror?.(error as Error);
    }
  }

  #stderr(line: unknown): void {
    // Redacted before any cut: a secret crossing it would leave its first characters. A long line
    // was cut by the worker already (which holds no secrets to redact with), marked at its end.
    const raw = String(line);
    const mark = WORKER_CUT_MARK.exec(raw)?.[0] ?? "";
    const text = redactCut(raw.slice(0, raw.length - mark.length), raw.length, mark !== "") + mark;
    this.#stderrTail.push(text.slice(0, 300));
    if (this.#stderrTail.length > STDERR_TAIL_LINES) this.#stderrTail.shift();
    if (!this.#stderrWindow.admit()) {
      this.#stats.suppressedStderrLines++;
      return;
    }
    this.#options.logger.debug("upstream stderr", {
      server: this.#id,
      line: text.slice(0, STDERR_LINE_CHARS),
    });
  }

  #closed(message: Extract<WorkerToKernel, { type: "closed" }>): void {
    this.#closeInfo ??= {
      reason: String(message.reason),
      ...(message.code !== undefined ? { code: message.code } : {}),
      ...(message.signal !== undefined ? { signal: message.signal } : {}),
    };
    this.#workerGone.resolve();
    if (this.#state === "starting") {
      this.#failStart(this.#error(`failed to start: ${message.reason}`), false);
    } else if (this.#state === "open") {
      this.#options.logger.warn("upstream closed", { server: this.#id, ...this.#closeInfo });
      void this.#teardown(false);
    }
  }

  #crashed(detail: string): void {
    this.#closeInfo ??= { reason: `worker crashed: ${detail}` };
    this.#workerGone.resolve();
    const error = this.#error(
      `lost its relay worker, which crashed (${detail}); the upstream was stopped and can be ` +
        "reconnected",
    );
    if (this.#state === "starting") {
      this.#failStart(error, false);
    } else if (this.#state === "open") {
      this.#options.logger.error("upstream worker crashed", { server: this.#id, error: detail });
      this.#report(error);
      void this.#teardown(false);
    }
  }

  /** Rejects start() after tearing down; `graceful` asks a live worker to stop its child first. */
  #failStart(error: Error, graceful: boolean): void {
    const starting = this.#starting;
    if (!starting) return;
    this.#starting = undefined;
    this.#options.logger.warn("upstream failed to start", {
      server: this.#id,
      error: error.message,
    });
    void this.#teardown(graceful).then(() => starting.reject(error));
  }

  #teardown(graceful: boolean): Promise<void> {
    this.#shutdown ??= this.#runTeardown(graceful);
    return this.#shutdown;
  }

  async #runTeardown(graceful: boolean): Promise<void> {
    this.#state = "closing";
    const worker = this.#worker;
    if (worker && graceful) {
      this.#post({ type: "stop", graceMs: this.#stopGraceMs });
      await settlesWithin(
        this.#options.clock ?? systemClock,
        this.#stopGraceMs + STOP_MARGIN_MS,
        this.#workerGone.promise,
      );
    }
    worker?.terminate();
    this.#endProcessGroup();
    this.#stderrWindow.close();
    this.#credit.close();
    this.#closeInfo ??= { reason: "closed" };
    this.#state = "closed";
    const starting = this.#starting;
    this.#starting = undefined;
    starting?.reject(this.#error("was closed before it started"));
    this.onclose?.();
  }

  /**
   * Ends what may remain of the child: its process group (grandchildren such as npx's node), and
   * the child itself when the worker never confirmed its exit (a reaped pid may be reused).
   */
  #endProcessGroup(): void {
    const pid = this.#pid;
    if (pid === undefined) return;
    const confirmedExit = this.#closeInfo?.code !== undefined ||
      this.#closeInfo?.signal !== undefined;
    const targets: number[] = [];
    if (Deno.build.os !== "windows") targets.push(-pid);
    if (!confirmedExit) targets.push(pid);
    for (const target of targets) {
      try {
        Deno.kill(target, "SIGKILL");
      } catch (error) {
        if ((error as Error).name !== "NotFound") {
          this.#options.logger.warn("cannot kill upstream process", {
            server: this.#id,
            pid: target,
            error: message(error),
          });
        }
      }
    }
  }

  #report(error: Error): void {
    this.onerror?.(error);
  }

  #error(text: string, data: Record<string, unknown> = {}): GatewayError {
    return new GatewayError("upstream_error", `Upstream "${this.#id}" ${text}`, {
      server: this.#id,
      ...data,
    });
  }
}

function message(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
