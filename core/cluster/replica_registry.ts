/**
 * Replica heartbeats (cluster mode): each replica keeps one record in the `agent33_replicas`
 * bucket, rewritten every heartbeat and forgotten a few heartbeats after the last (the bucket's
 * TTL, and a freshness check on read, since a JetStream expiry tells no watcher). The record says
 * what `/v1/operator/status` shows of the cluster: who runs, since when, which fleet and policy
 * revisions each applied, how its upstreams are, and whether it is draining. A replica that stops
 * cleanly deletes its record; one that dies ages out.
 * @module
 */
import { z } from "zod";
import type { Clock, TimerHandle } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import {
  decodeJson,
  encodeJson,
  type SharedBucket,
  sharedKey,
  type SharedState,
} from "../bus/shared_state.ts";
import { GATEWAY_INFO } from "../support/version.ts";

/** The bucket of replica heartbeats. */
export const REPLICAS_BUCKET = "agent33_replicas";
/** A record is forgotten after this many heartbeats without one. */
const TTL_HEARTBEATS = 3;
/** Replicas listed at most (a record more is not read). */
const MAX_LISTED = 256;

const revisionRejected = z.object({ revision: z.number(), reason: z.string().max(2048) });

const replicaRecord = z.object({
  id: z.string().max(128),
  url: z.string().max(512).optional(),
  version: z.string().max(64),
  startedAt: z.number(),
  heartbeatAt: z.number(),
  draining: z.boolean(),
  fleetRevision: z.number(),
  policyRevision: z.number(),
  fleet: z.object({ servers: z.number(), ready: z.number(), failed: z.number() }),
  rejected: z.object({ fleet: revisionRejected.optional(), policies: revisionRejected.optional() })
    .optional(),
  /** MCP_CLUSTER_CONFIG=mounted: digests of the fleet and policy text in force. */
  digests: z.object({
    fleet: z.string().max(80).optional(),
    policies: z.string().max(80).optional(),
  })
    .optional(),
});

/** One replica as its heartbeat describes it. */
export type ReplicaRecord = z.infer<typeof replicaRecord>;

/** What a heartbeat reports of the replica's own state, read at each beat. */
export type ReplicaState = Pick<
  ReplicaRecord,
  "fleetRevision" | "policyRevision" | "fleet" | "rejected" | "digests"
>;

/** What {@link ReplicaRegistry} is built from. */
export interface ReplicaRegistryOptions {
  state: SharedState;
  replicaId: string;
  clock: Clock;
  logger: Logger;
  /** Milliseconds between heartbeats. */
  intervalMs: number;
  /** The replica's state now. */
  snapshot: () => ReplicaState;
}

/** This replica's heartbeat, and the cluster's replicas as their heartbeats say. */
export class ReplicaRegistry {
  readonly #options: ReplicaRegistryOptions;
  readonly #key: string;
  #bucket: SharedBucket | undefined;
  #timer: TimerHandle | undefined;
  #beating: Promise<void> = Promise.resolve();
  #startedAt = 0;
  #started = false;
  #url: string | undefined;
  #draining = false;
  #stopped = false;
  /** Whether the last heartbeat failed (logged once per outage, not every beat). */
  #failing = false;

  constructor(options: ReplicaRegistryOptions) {
    this.#options = options;
    this.#key = sharedKey(options.replicaId);
  }

  /** How long a record lives without a heartbeat. */
  get ttlMs(): number {
    return this.#options.intervalMs * TTL_HEARTBEATS;
  }

  async #open(): Promise<SharedBucket> {
    return this.#bucket ??= await this.#options.state.bucket(REPLICAS_BUCKET, {
      ttlMs: this.ttlMs,
      maxValueBytes: 16 * 1024,
    });
  }

  /** Registers this replica (its first heartbeat, awaited) and keeps beating until {@link stop}. */
  async start(url?: string): Promise<void> {
    this.#startedAt = this.#options.clock.now();
    this.#started = true;
    this.#url = url;
    // A heartbeat that cannot be written is logged and tried again: it never stops a start.
    await this.beat();
    this.#schedule();
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = this.#options.clock.setTimeout(() => {
      void this.beat().finally(() => this.#schedule());
    }, this.#options.intervalMs);
  }

  /** Writes this replica's record now; a failure is logged, and the next beat tries again. */
  beat(): Promise<void> {
    this.#beating = this.#beating.then(() => this.#write());
    return this.#beating;
  }

  async #write(): Promise<void> {
    if (this.#stopped) return;
    const { clock, replicaId, logger } = this.#options;
    const record: ReplicaRecord = {
      id: replicaId,
      ...(this.#url ? { url: this.#url } : {}),
      version: GATEWAY_INFO.version,
      startedAt: this.#startedAt,
      heartbeatAt: clock.now(),
      draining: this.#draining,
      ...this.#options.snapshot(),
    };
    try {
      await (await this.#open()).put(this.#key, encodeJson(record));
      if (this.#failing) logger.info("replica heartbeat written again");
      this.#failing = false;
    } catch (error) {
      if (!this.#failing) {
        logger.warn(
          `replica heartbeat not written (the shared state is unreachable?); the others stop ` +
            `listing this replica after ${this.ttlMs} ms, retried every heartbeat`,
          { error: String(error) },
        );
      }
      this.#failing = true;
    }
  }

  /** Marks this replica draining in its record at once (a stop has begun). */
  drain(): Promise<void> {
    this.#draining = true;
    return this.#started ? this.beat() : Promise.resolve();
  }

  /** Stops beating and deletes this replica's record, so the cluster stops listing it at once. */
  async stop(): Promise<void> {
    // First: a beat finishing now must not schedule another.
    this.#stopped = true;
    this.#timer?.cancel();
    await this.#beating;
    // Never registered (a start that failed before serving): nothing to delete.
    if (!this.#started) return;
    try {
      await (await this.#open()).delete(this.#key);
    } catch (error) {
      this.#options.logger.warn(
        `replica record not deleted; it ages out after ${this.ttlMs} ms`,
        { error: String(error) },
      );
    }
  }

  /**
   * The replicas with a fresh heartbeat, by id; records that do not parse or are older than the
   * TTL are left out (a dead replica's record can outlive it until the bucket drops it).
   */
  async list(): Promise<ReplicaRecord[]> {
    const bucket = await this.#open();
    const keys = (await bucket.keys()).slice(0, MAX_LISTED);
    const now = this.#options.clock.now();
    const entries = await Promise.all(keys.map((key) => bucket.get(key).catch(() => null)));
    const replicas: ReplicaRecord[] = [];
    for (const entry of entries) {
      if (!entry) continue;
      let value: unknown;
      try {
        value = decodeJson(entry.value);
      } catch {
        continue;
      }
      const parsed = replicaRecord.safeParse(value);
      if (!parsed.success) {
        this.#options.logger.debug("replica record skipped: not a heartbeat", { key: entry.key });
        continue;
      }
      if (now - parsed.data.heartbeatAt >= this.ttlMs) continue;
      replicas.push(parsed.data);
    }
    return replicas.sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  }
}
