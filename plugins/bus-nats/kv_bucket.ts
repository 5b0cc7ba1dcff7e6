/**
 * Opening (or creating) a JetStream KV bucket the way replicas that start together with a fresh
 * NATS cluster need it: until the cluster has elected its JetStream meta leader and every node
 * has joined, a create times out, finds no responders or finds too few peers; two replicas
 * creating one bucket at once make the loser's create overlap the winner's stream. All of those
 * pass on their own, so they are tried again for a while; anything else fails at once.
 *
 * Reads go to the stream's leader, never "direct" to any node that keeps a copy: a follower can
 * answer before it has applied a write another replica just made, and a session opened on one
 * replica would then be unknown (404) on the next for a moment.
 * @module
 */
import type { KV, KvOptions, NatsConnection } from "nats";
import { type Clock, type Logger, retry } from "../../core/plugin_api/mod.ts";

/** How long a bucket's open is tried again while the errors look like a cluster still forming. */
export const KV_OPEN_BUDGET_MS = 30_000;
const KV_OPEN_RETRY_MS = 250;
const KV_OPEN_RETRY_MAX_MS = 2_000;

/**
 * Errors of a JetStream that is still forming or a create that lost a race: a timeout, no
 * responders (503), "JetStream system temporarily unavailable", no suitable or too few peers
 * (a node not joined yet), and an overlapping or in-use stream (another replica created it).
 */
const TRANSIENT =
  /TIMEOUT|timed? ?out|503|no responders|temporarily unavailable|no suitable peers|insufficient resources|overlap|already in use/i;

/** Whether `error` passes on its own when the open is tried again. */
export function isTransientKvError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  return TRANSIENT.test(`${typeof code === "string" ? code : ""} ${message}`);
}

/** Where {@link openKvBucket} waits between tries and says that it does. */
export interface KvOpenContext {
  clock: Clock;
  logger: Logger;
}

/**
 * The bucket `name`, created with `options` if absent, read through its leader; rejects with the
 * last error.
 */
export async function openKvBucket(
  nc: NatsConnection,
  name: string,
  options: Partial<KvOptions>,
  context: KvOpenContext,
): Promise<KV> {
  // A server without JetStream says so in its INFO: no point waiting for it to form.
  if (nc.info && nc.info.jetstream !== true) {
    throw new Error(`nats-server ${nc.info.version} at ${nc.getServer()} has JetStream disabled`);
  }
  return await retry(() => nc.jetstream().views.kv(name, { ...options, allow_direct: false }), {
    clock: context.clock,
    withinMs: KV_OPEN_BUDGET_MS,
    transient: isTransientKvError,
    pauseMs: (attempt) => Math.min(KV_OPEN_RETRY_MS * attempt, KV_OPEN_RETRY_MAX_MS),
    retrying: (error, attempt) =>
      context.logger.warn(`opening the KV bucket "${name}" failed (try ${attempt}); retrying`, {
        error: String(error),
      }),
  });
}
