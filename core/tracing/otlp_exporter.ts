/**
 * Export of finished spans over OTLP/HTTP: each span is encoded into the current batch as it
 * ends; a batch goes out when it holds `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` spans (2,048) or
 * `OTEL_BSP_SCHEDULE_DELAY` after its first (1 s), at most {@link MAX_IN_FLIGHT} posts at once
 * (a post costs the sender ~150 µs plus ~1 µs per KiB, so posts are few and large). Spans beyond
 * `OTEL_BSP_MAX_QUEUE_SIZE` waiting or in flight (16,384) are dropped and counted: an
 * unreachable collector costs memory no further. Timers come from the injected clock.
 * @module
 */
import { type Clock, deadline, type TimerHandle } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import type { SpanBatch } from "./span_batch.ts";
import type { SpanStore } from "./span_store.ts";
import type { TracingConfig } from "./tracing_config.ts";

/** Export requests at once. */
export const MAX_IN_FLIGHT = 4;

/** A sealed batch waiting for its post. */
interface Sealed {
  body: Uint8Array<ArrayBuffer>;
  spans: number;
}

/** Batches the spans of one tracer and posts them to the collector. */
export class SpanExporter {
  readonly #config: TracingConfig;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #batch: SpanBatch;
  readonly #ready: Sealed[] = [];
  readonly #pending = new Set<Promise<void>>();
  #timer: TimerHandle | undefined;
  /** Spans in the batch, sealed or in flight. */
  #queued = 0;
  #failing = false;
  #dropped = 0;

  constructor(config: TracingConfig, logger: Logger, clock: Clock, batch: SpanBatch) {
    this.#config = config;
    this.#log = logger;
    this.#clock = clock;
    this.#batch = batch;
  }

  /** Encodes the finished span in `slot` of `store` into the batch; seals the batch when it is full. */
  add(store: SpanStore, slot: number): void {
    if (this.#queued >= this.#config.maxQueuedSpans) {
      this.#dropped++;
      return;
    }
    this.#batch.add(store, slot);
    this.#queued++;
    if (this.#batch.count >= this.#config.batchSpans) this.#seal();
    else this.#timer ??= this.#clock.setTimeout(() => this.#seal(), this.#config.batchDelayMs);
  }

  /** Sends everything added so far and waits for the posts to settle. */
  async flush(): Promise<void> {
    this.#seal();
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  #seal(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    const spans = this.#batch.count;
    if (spans === 0) return;
    const body = this.#batch.take();
    // The body is the batch's buffer, which the next span overwrites: posted now (fetch copies
    // it as it is called), or copied to wait for a post to finish.
    if (this.#ready.length === 0 && this.#pending.size < MAX_IN_FLIGHT) this.#post({ body, spans });
    else this.#ready.push({ body: body.slice(), spans });
  }

  #pump(): void {
    while (this.#pending.size < MAX_IN_FLIGHT) {
      const next = this.#ready.shift();
      if (next === undefined) return;
      this.#post(next);
    }
  }

  #post({ body, spans }: Sealed): void {
    const limit = deadline(this.#clock, this.#config.timeoutMs);
    const sent = fetch(this.#config.endpoint, {
      method: "POST",
      headers: { ...this.#config.headers, "content-type": this.#batch.contentType },
      body,
      signal: limit.signal,
    }).then(async (response) => {
      await response.body?.cancel();
      if (!response.ok) throw new Error(`the collector answered HTTP ${response.status}`);
      if (this.#failing) this.#log.info(`trace export to ${this.#config.endpoint} works again`);
      this.#failing = false;
    }).catch((error: unknown) => {
      // Logged once until an export works again: a collector that is down must not flood the log.
      if (!this.#failing) {
        this.#log.warn(
          `trace export to ${this.#config.endpoint} failed (${describe(error)}); spans are ` +
            "dropped until it works: check OTEL_EXPORTER_OTLP_ENDPOINT and the collector",
        );
      }
      this.#failing = true;
    }).finally(() => {
      limit.cancel();
      this.#pending.delete(sent);
      this.#queued -= spans;
      if (this.#dropped > 0) {
        this.#log.warn(
          `${this.#dropped} spans dropped: more than ${this.#config.maxQueuedSpans} were ` +
            "waiting for export (OTEL_BSP_MAX_QUEUE_SIZE)",
        );
        this.#dropped = 0;
      }
      this.#pump();
    });
    this.#pending.add(sent);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
