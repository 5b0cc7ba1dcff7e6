/**
 * The audit log: one JSON line per governance decision, appended in order to a size-rotated
 * file, and a `governance.decision` event on the bus for each.
 *
 * Recording never throws and never waits for the disk: lines are queued and a single writer
 * appends them in order. A failing disk is logged once per outage and counted; the call being
 * audited is never failed by it. Raw arguments go to the file only when asked for, and never
 * onto the bus; every line is redacted (core/support/redact.ts) before it is queued.
 * @module
 */
import { dirname } from "node:path";
import type { Clock } from "../support/clock.ts";
import type { EventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import type { Logger } from "../support/logger.ts";
import { redactDeep, redactRepeated } from "../support/redact.ts";
import type { EffectClass } from "./policy.ts";

/** The governance outcome of one call. */
export type AuditVerdict = Extract<GatewayEvent, { type: "governance.decision" }>["verdict"];

/** One audited decision. */
export interface AuditEntry {
  /** ISO time of the decision. */
  time: string;
  tenant: string;
  subject: string;
  tool: string;
  server?: string;
  /** What was used when not a tool call: `resources/read` and the like; `tool` holds its name. */
  surface?: string;
  effect: EffectClass;
  verdict: AuditVerdict;
  /** The denial code, for denials. */
  code?: string;
  /** The rule that decided, in words. */
  rule?: string;
  argumentsHash: string;
  /** The replica that decided (cluster mode: MCP_REPLICA_ID); set by the log, not the caller. */
  replica?: string;
  /** Raw arguments; written only with `includeArguments`, never published. */
  arguments?: Record<string, unknown>;
}

/** Options for {@link AuditLog}. */
export interface AuditLogOptions {
  /** The JSONL file; undefined publishes events only. Its directory is created. */
  path?: string;
  /** Rotate before a write would take the file past this size; default 10 MiB. */
  maxBytes?: number;
  /** Rotated files kept (`file.1` newest … `file.<keep>` oldest); default 5. */
  keep?: number;
  /** Write raw arguments into the file; default false (the hash is always written). */
  includeArguments?: boolean;
  /** Most lines waiting for the disk; past it the oldest are dropped and counted. Default 10 000. */
  maxQueued?: number;
  bus: EventBus;
  clock: Clock;
  logger: Logger;
  /** This replica's id (cluster mode): every line and event carries it. */
  replica?: string;
}

/** Counters of an {@link AuditLog}. */
export interface AuditLogStats {
  /** Lines appended to the file. */
  written: number;
  /** Lines lost to write errors. */
  failed: number;
  /** Lines dropped because the queue was full or the log was closed. */
  dropped: number;
  /** Lines waiting to be written, including those being written now. */
  queued: number;
  /** Rotations performed. */
  rotations: number;
}

/** Default rotation size: 10 MiB. */
export const DEFAULT_AUDIT_MAX_BYTES = 10 * 1024 * 1024;
/** Default rotated files kept. */
export const DEFAULT_AUDIT_KEEP = 5;
const DEFAULT_MAX_QUEUED = 10_000;

const encoder = new TextEncoder();

/** Appends audit lines and publishes decisions. */
export class AuditLog {
  readonly #path: string | undefined;
  readonly #maxBytes: number;
  readonly #keep: number;
  readonly #includeArguments: boolean;
  readonly #maxQueued: number;
  readonly #bus: EventBus;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #replica: string | undefined;
  #queue: Uint8Array[] = [];
  /** Lines taken by the writer and not yet written or failed. */
  #inFlight = 0;
  #writer: Promise<void> | undefined;
  #file: Deno.FsFile | undefined;
  #size = 0;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** Set after a failure is logged, cleared by the next success: one log line per outage. */
  #failing = false;
  #warnedDrop = false;
  #written = 0;
  #failed = 0;
  #dropped = 0;
  #rotations = 0;

  constructor(options: AuditLogOptions) {
    const maxBytes = options.maxBytes ?? DEFAULT_AUDIT_MAX_BYTES;
    const keep = options.keep ?? DEFAULT_AUDIT_KEEP;
    const maxQueued = options.maxQueued ?? DEFAULT_MAX_QUEUED;
    if (!Number.isSafeInteger(maxBytes) || maxBytes <= 0) {
      throw new RangeError(`maxBytes must be a positive integer, got ${maxBytes}`);
    }
    if (!Number.isSafeInteger(keep) || keep < 0) {
      throw new RangeError(`keep must be a non-negative integer, got ${keep}`);
    }
    if (!Number.isSafeInteger(maxQueued) || maxQueued <= 0) {
      throw new RangeError(`maxQueued must be a positive integer, got ${maxQueued}`);
    }
    this.#path = options.path;
    this.#maxBytes = maxBytes;
    this.#keep = keep;
    this.#includeArguments = options.includeArguments ?? false;
    this.#maxQueued = maxQueued;
    this.#bus = options.bus;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#replica = options.replica;
  }

  /**
   * Records one decision: publishes `governance.decision` now and queues the file line.
   * Never throws and never waits; `time` defaults to the clock's now.
   */
  record(entry: Omit<AuditEntry, "time"> & { time?: string }): void {
    try {
      const full: AuditEntry = {
        ...entry,
        time: entry.time ?? new Date(this.#clock.now()).toISOString(),
        ...(this.#replica === undefined ? {} : { replica: this.#replica }),
      };
      this.#publish(full);
      if (this.#path !== undefined) this.#enqueue(full);
    } catch (error) {
      this.#logger.error("audit record failed; decision not audited", {
        tool: String(entry?.tool),
        error: String(error),
      });
    }
  }

  /** Resolves once every line recorded so far is written (or has failed). */
  async flush(): Promise<void> {
    while (this.#writer) await this.#writer;
  }

  /** Flushes and closes the file; later records are published but not written. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  /** Counters. */
  stats(): AuditLogStats {
    return {
      written: this.#written,
      failed: this.#failed,
      dropped: this.#dropped,
      queued: this.#queue.length + this.#inFlight,
      rotations: this.#rotations,
    };
  }

  async #close(): Promise<void> {
    await this.flush();
    this.#closed = true;
    this.#closeFile();
  }

  #publish(entry: AuditEntry): void {
    const event: GatewayEvent = {
      type: "governance.decision",
      time: entry.time,
      tenant: entry.tenant,
      subject: entry.subject,
      tool: entry.tool,
      ...(entry.server === undefined ? {} : { server: entry.server }),
      ...(entry.surface === undefined ? {} : { surface: entry.surface }),
      effect: entry.effect,
      verdict: entry.verdict,
      ...(entry.code === undefined ? {} : { code: entry.code }),
      // The one free-text field: decision events skip the bus's redaction.
      ...(entry.rule === undefined ? {} : { rule: redactRepeated(entry.rule) }),
      argumentsHash: entry.argumentsHash,
      ...(entry.replica === undefined ? {} : { replica: entry.replica }),
    };
    this.#bus.publish(event);
  }

  #enqueue(entry: AuditEntry): void {
    if (this.#closed) {
      this.#dropped++;
      return;
    }
    this.#queue.push(encoder.encode(this.#line(entry) + "\n"));
    if (this.#queue.length > this.#maxQueued) {
      this.#queue.shift();
      this.#dropped++;
      if (!this.#warnedDrop) {
        this.#warnedDrop = true;
        this.#logger.warn("audit queue full; dropping the oldest unwritten lines", {
          path: this.#path,
          limit: this.#maxQueued,
        });
      }
    }
    this.#writer ??= this.#drain();
  }

  /** The file line; arguments that cannot be serialized are replaced by a note, not lost silently. */
  #line(entry: AuditEntry): string {
    // Redacted like the log: URIs, rules and reasons carry client and upstream text, and the file
    // outlives every other diagnostic. Arguments, when written at all, are redacted too.
    const { arguments: args, ...rest } = redactDeep(entry);
    if (!this.#includeArguments || args === undefined) return JSON.stringify(rest);
    try {
      return JSON.stringify({ ...rest, arguments: args });
    } catch (error) {
      return JSON.stringify({ ...rest, argumentsError: String(error) });
    }
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue;
        this.#queue = [];
        this.#inFlight = batch.length;
        await this.#writeBatch(batch);
        this.#inFlight = 0;
      }
    } finally {
      this.#writer = undefined;
      this.#warnedDrop = false;
    }
  }

  async #writeBatch(lines: Uint8Array[]): Promise<void> {
    let i = 0;
    try {
      await this.#open();
      while (i < lines.length) {
        // Lines are never split across files; a line bigger than maxBytes gets a file alone.
        if (this.#size > 0 && this.#size + lines[i]!.byteLength > this.#maxBytes) {
          await this.#rotate();
        }
        let end = i;
        let bytes = 0;
        while (
          end < lines.length && this.#size + bytes + lines[end]!.byteLength <= this.#maxBytes
        ) {
          bytes += lines[end]!.byteLength;
          end++;
        }
        if (end === i) end = i + 1;
        await this.#append(concat(lines.slice(i, end)));
        this.#written += end - i;
        i = end;
      }
      if (this.#failing) {
        this.#failing = false;
        this.#logger.info("audit log writable again", { path: this.#path });
      }
    } catch (error) {
      this.#failed += lines.length - i;
      this.#closeFile();
      if (!this.#failing) {
        this.#failing = true;
        this.#logger.error("audit log write failed; decisions are still published as events", {
          path: this.#path,
          error: String(error),
        });
      }
    }
  }

  async #open(): Promise<void> {
    if (this.#file) return;
    const path = this.#path!;
    await Deno.mkdir(dirname(path), { recursive: true });
    const file = await Deno.open(path, { append: true, create: true });
    try {
      this.#size = (await file.stat()).size;
    } catch (error) {
      file.close();
      throw error;
    }
    this.#file = file;
  }

  async #append(bytes: Uint8Array): Promise<void> {
    const file = this.#file!;
    let offset = 0;
    while (offset < bytes.byteLength) offset += await file.write(bytes.subarray(offset));
    this.#size += bytes.byteLength;
  }

  /** file → file.1 → … → file.<keep>; the oldest falls off. With keep 0 the file starts over. */
  async #rotate(): Promise<void> {
    const path = this.#path!;
    this.#closeFile();
    if (this.#keep === 0) {
      await Deno.remove(path).catch(ignoreNotFound);
    } else {
      await Deno.remove(`${path}.${this.#keep}`).catch(ignoreNotFound);
      for (let n = this.#keep - 1; n >= 1; n--) {
        await Deno.rename(`${path}.${n}`, `${path}.${n + 1}`).catch(ignoreNotFound);
      }
      await Deno.rename(path, `${path}.1`).catch(ignoreNotFound);
    }
    this.#rotations++;
    await this.#open();
  }

  #closeFile(): void {
    const file = this.#file;
    this.#file = undefined;
    if (!file) return;
    try {
      file.close();
    } catch {
      // Already closed: nothing left to release.
    }
  }
}

function ignoreNotFound(error: unknown): void {
  if (!(error instanceof Deno.errors.NotFound)) throw error;
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}
