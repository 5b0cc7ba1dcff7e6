/**
 * SessionRecord: what a replica needs to serve a Streamable HTTP session it has never seen — the
 * client's initialize parameters (so the SDK server is rebuilt with the same protocol version,
 * capabilities and clientInfo), who opened it (a session id is not a credential: its principal is
 * compared, its subject only shown), and the state the session changed since (log level,
 * search-mode activations, resource subscriptions).
 *
 * Records are read from the shared state, which another replica (or whoever reaches NATS) wrote:
 * each is size-bounded and validated before it is used, and a bad one counts as absent.
 * @module
 */
import { z } from "zod";
import { decodeJson, encodeJson } from "../bus/shared_state.ts";

/** The largest encoded record, in bytes: also the bucket's `maxValueBytes`. */
export const SESSION_RECORD_MAX_BYTES = 64 * 1024;

/** Most activations and subscriptions a record keeps (ToolActivationManager's bound is 64). */
/** Most activations, and most resource subscriptions, one session holds (its record's bound too). */
export const MAX_ITEMS = 256;
/** Longest resource URI a session may subscribe to (what its record keeps). */
export const MAX_SUBSCRIPTION_URI = 4096;

const LOG_LEVELS = [
  "debug",
  "info",
  "notice",
  "warning",
  "error",
  "critical",
  "alert",
  "emergency",
] as const;

/** A resource subscription and the replica whose upstream instance holds it (and relays it). */
const SubscriptionSchema = z.object({
  uri: z.string().min(1).max(MAX_SUBSCRIPTION_URI),
  replica: z.string().min(1).max(128),
});

/** The stored shape, version 1. */
export const SessionRecordSchema = z.object({
  v: z.literal(1),
  /** The protocolVersion the client asked for in initialize (the SDK negotiates from it again). */
  protocolVersion: z.string().min(1).max(64),
  capabilities: z.record(z.string(), z.unknown()),
  clientInfo: z.looseObject({ name: z.string().max(512), version: z.string().max(512) }),
  tenant: z.string().min(1).max(256),
  subject: z.string().max(1024),
  /**
   * Who opened it, as callers are compared (see TokenPayload.principal). Optional only for the
   * records of older replicas, which lack it: those match no caller (closed, not open).
   */
  principal: z.string().min(1).max(4096).optional(),
  /** The upstream of a `/mcp/<server_id>` session. */
  upstream: z.string().min(1).max(128).optional(),
  logLevel: z.enum(LOG_LEVELS).optional(),
  activations: z.array(z.string().min(1).max(512)).max(MAX_ITEMS),
  subscriptions: z.array(SubscriptionSchema).max(MAX_ITEMS),
  /** The replica that served initialize, and when (its clock, ms): for operators. */
  openedBy: z.string().min(1).max(128),
  openedAt: z.number().int().nonnegative(),
});

/** One session's record. */
export type SessionRecord = z.infer<typeof SessionRecordSchema>;

/** A record's resource subscription. */
export type SessionSubscription = SessionRecord["subscriptions"][number];

/** The record's bytes; throws `RangeError` naming the bound when it would not fit. */
export function encodeSessionRecord(record: SessionRecord): Uint8Array {
  const bytes = encodeJson(record);
  if (bytes.byteLength > SESSION_RECORD_MAX_BYTES) {
    throw new RangeError(
      `the session record is ${bytes.byteLength} bytes, over the ${SESSION_RECORD_MAX_BYTES} a ` +
        "shared session may hold (large client capabilities or clientInfo?)",
    );
  }
  return bytes;
}

/** A record from stored bytes, or the reason it is unusable (oversized, not JSON, wrong shape). */
export function decodeSessionRecord(
  bytes: Uint8Array,
): { record: SessionRecord } | { error: string } {
  if (bytes.byteLength > SESSION_RECORD_MAX_BYTES) {
    return { error: `${bytes.byteLength} bytes, over ${SESSION_RECORD_MAX_BYTES}` };
  }
  let value: unknown;
  try {
    value = decodeJson(bytes);
  } catch (error) {
    return { error: `not JSON (${(error as Error).message})` };
  }
  const parsed = SessionRecordSchema.safeParse(value);
  if (!parsed.success) return { error: z.prettifyError(parsed.error).replaceAll("\n", "; ") };
  return { record: parsed.data };
}

/** What a record is made from: the initialize request's params and the caller that sent it. */
export interface SessionOpening {
  params: { protocolVersion: string; capabilities: unknown; clientInfo: unknown };
  tenant: string;
  subject: string;
  principal: string;
  upstream?: string;
  replica: string;
  now: number;
}

/** A new session's record; throws `RangeError` when the client's parameters break its bounds. */
export function newSessionRecord(opening: SessionOpening): SessionRecord {
  const parsed = SessionRecordSchema.safeParse({
    v: 1,
    protocolVersion: opening.params.protocolVersion,
    capabilities: opening.params.capabilities,
    clientInfo: opening.params.clientInfo,
    tenant: opening.tenant,
    subject: opening.subject,
    principal: opening.principal,
    ...(opening.upstream === undefined ? {} : { upstream: opening.upstream }),
    activations: [],
    subscriptions: [],
    openedBy: opening.replica,
    openedAt: opening.now,
  });
  if (!parsed.success) {
    throw new RangeError(
      `the initialize parameters do not fit a shared session record: ${
        z.prettifyError(parsed.error).replaceAll("\n", "; ")
      }`,
    );
  }
  encodeSessionRecord(parsed.data);
  return parsed.data;
}
