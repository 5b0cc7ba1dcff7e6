/**
 * Finished spans written straight into a span store's slots, for the encoders' tests: what the
 * tracer leaves in a slot when a span ends, from plain fields.
 * @module
 */
import type { SpanValue } from "../../core/tracing/gateway_tracer.ts";
import { type EncodedShared, type SpanStore, WORDS } from "../../core/tracing/span_store.ts";

/** A finished span's fields, for {@link recordFinished}. */
export interface FinishedFields {
  /** Trace id words, span id words, parent span id words (zeros for a root). */
  trace: [number, number, number, number];
  id: [number, number];
  parent?: [number, number];
  traceState?: string;
  name: string;
  target?: string;
  kind: number;
  startMs: number;
  endMs: number;
  attributes?: Record<string, SpanValue | undefined>;
  shared?: EncodedShared;
  error?: string;
}

/** Records a finished span from its fields into a slot of `store` (for the encoders' tests). */
export function recordFinished(store: SpanStore, fields: FinishedFields): number {
  const slot = store.alloc();
  const at = slot * WORDS;
  store.ids.set([...fields.trace, ...fields.id, ...(fields.parent ?? [0, 0])], at);
  store.times[slot * 2] = fields.startMs;
  store.times[slot * 2 + 1] = fields.endMs;
  store.kinds[slot] = fields.kind;
  store.names[slot] = fields.name;
  store.targets[slot] = fields.target;
  store.traceStates[slot] = fields.traceState;
  store.errors[slot] = fields.error;
  store.shared[slot] = fields.shared;
  for (const [key, value] of Object.entries(fields.attributes ?? {})) {
    if (value !== undefined) store.set(slot, key, value);
  }
  return slot;
}
