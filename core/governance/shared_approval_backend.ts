/**
 * SharedApprovalBackend: the approval records of every replica in one shared bucket
 * (`agent33_approvals`, JetStream KV in cluster mode), behind {@link ApprovalBackend}.
 *
 * - `request.<id>`: one request, the whole record (raw arguments and, once approved, the token
 *   only its requester fetches: the bucket is as sensitive as the approvals file).
 * - `tenant.<tenant>`: the tenant's pending requests as slots `{id, call, expiresAt}`, written
 *   by compare-and-set, so MCP_MAX_PENDING_APPROVALS_PER_TENANT and …_PER_PRINCIPAL count every
 *   replica's requests and an identical request filed on two replicas at once is one request.
 *   `call` is approval_queue.ts's sharedCallOf: its last half names the requester, which is how a
 *   principal's slots are told apart without a field older replicas would refuse.
 *
 * What is read back is checked (zod) and skipped with a warning when malformed. Every failure to
 * reach the bucket is an `internal` GatewayError naming it: approvals fail closed.
 * @module
 */
import { z } from "zod";
import {
  decodeJson,
  encodeJson,
  type SharedBucket,
  sharedKey,
  type SharedState,
} from "../bus/shared_state.ts";
import { GatewayError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import type {
  Admission,
  AdmissionLimits,
  ApprovalBackend,
  ApprovalRecord,
} from "./approval_queue.ts";
import { APPROVAL_RECORD } from "./approval_store.ts";

/** The bucket every replica shares approvals in. */
export const APPROVALS_BUCKET = "agent33_approvals";
/** Replicas' clocks may differ this much: records are kept this much longer than they matter. */
const CLOCK_SKEW_MS = 60_000;
/** Compare-and-set rounds on one tenant's slots before a request is refused as too contended. */
const MAX_ATTEMPTS = 16;
/** Most slots a tenant document may hold, whatever a replica configured (a hostile bucket too). */
const MAX_SLOTS = 10_000;
const MAX_REVISIONS = 50_000;
const REQUEST_PREFIX = "request.";
const ID = /^[A-Za-z0-9_-]{1,64}$/;

const SLOTS = z.object({
  slots: z.array(
    z.object({
      id: z.string().regex(ID),
      call: z.string().regex(/^[0-9a-f]{64}$/),
      expiresAt: z.number(),
    }).strict(),
  ).max(MAX_SLOTS),
}).strict();

type Slot = z.infer<typeof SLOTS>["slots"][number];

/** Options of {@link SharedApprovalBackend.open}. */
export interface SharedApprovalBackendOptions {
  /** How long a request waits for a decision (MCP_APPROVAL_TTL_SECONDS), in ms. */
  requestTtlMs: number;
  /** How long an issued token is valid, in ms. */
  tokenTtlMs: number;
  logger: Logger;
}

/** Approval records in a shared bucket. */
export class SharedApprovalBackend implements ApprovalBackend {
  readonly #bucket: SharedBucket;
  readonly #logger: Logger;
  /**
   * The revision of each record as last read or written here: what a decision compares against,
   * so a decision is based on what its rules were checked on (the watch never moves it).
   */
  readonly #revisions = new Map<string, number>();
  /** The latest revision of each record seen at all (watch included): older deliveries are stale. */
  readonly #latest = new Map<string, number>();

  private constructor(bucket: SharedBucket, logger: Logger) {
    this.#bucket = bucket;
    this.#logger = logger;
  }

  /** Opens (creating) the bucket, keeping records until nobody can learn anything from them. */
  static async open(
    shared: SharedState,
    options: SharedApprovalBackendOptions,
  ): Promise<SharedApprovalBackend> {
    // A decided record matters until its token expires, then one more request TTL for answers.
    const ttlMs = 2 * options.requestTtlMs + options.tokenTtlMs + CLOCK_SKEW_MS;
    const bucket = await unreachable(() => shared.bucket(APPROVALS_BUCKET, { ttlMs }));
    return new SharedApprovalBackend(bucket, options.logger);
  }

  admit(
    record: ApprovalRecord,
    call: string,
    limits: AdmissionLimits,
    now: number,
  ): Promise<Admission> {
    const requester = call.slice(32);
    const full = (slots: readonly Slot[]): Admission | undefined => {
      if (slots.length >= limits.tenant) return { full: "tenant" };
      if (record.principal === undefined) return undefined;
      const own = slots.reduce((n, s) => s.call.slice(32) === requester ? n + 1 : n, 0);
      return own >= limits.principal ? { full: "principal" } : undefined;
    };
    return unreachable(async () => {
      const key = sharedKey("tenant", record.tenant);
      let written = false;
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const entry = await this.#bucket.get(key);
        let slots = entry ? this.#slots(key, entry.value) : [];
        slots = slots.filter((s) => s.expiresAt > now && s.id !== record.id);
        const same = slots.find((s) => s.call === call);
        if (same) {
          const other = await this.read(same.id);
          if (other?.status === "pending" && other.expiresAt > now) {
            if (written) await this.#forget(record.id);
            return { record: other };
          }
          slots = slots.filter((s) => s !== same);
        }
        // A slot outlives its decision only if a replica died between the two writes.
        if (full(slots)) slots = await this.#stillPending(slots, now);
        const refused = full(slots);
        if (refused) {
          if (written) await this.#forget(record.id);
          return refused;
        }
        if (!written) {
          await this.#write(record);
          written = true;
        }
        const next = encodeJson({
          slots: [...slots, { id: record.id, call, expiresAt: record.expiresAt }],
        });
        const done = entry
          ? await this.#bucket.update(key, next, entry.revision)
          : await this.#bucket.create(key, next);
        if (done !== null) return { record };
      }
      await this.#forget(record.id);
      throw new GatewayError(
        "approval_queue_full",
        `Approval requests for tenant "${record.tenant}" are being filed on several replicas ` +
          "too fast to count; retry the call in a moment",
        { tenant: record.tenant },
      );
    });
  }

  read(id: string): Promise<ApprovalRecord | undefined> {
    if (!ID.test(id)) return Promise.resolve(undefined);
    return unreachable(async () => {
      const entry = await this.#bucket.get(REQUEST_PREFIX + id);
      if (!entry) {
        this.#revisions.delete(id);
        return undefined;
      }
      const record = this.#record(entry.key, entry.value);
      if (record) this.#seen(id, entry.revision);
      return record;
    });
  }

  decide(next: ApprovalRecord): Promise<boolean> {
    return unreachable(async () => {
      const revision = this.#revisions.get(next.id);
      if (revision === undefined) return false;
      const written = await this.#bucket.update(
        REQUEST_PREFIX + next.id,
        this.#encode(next),
        revision,
      );
      if (written === null) return false;
      this.#seen(next.id, written);
      await this.#release(next.tenant, next.id).catch((error) =>
        this.#logger.warn(
          `the pending slot of approval request ${next.id} stays until it lapses: ${error}`,
        )
      );
      return true;
    });
  }

  watch(
    apply: (record: ApprovalRecord) => void,
    forget: (id: string) => void,
  ): Promise<() => void> {
    return unreachable(() =>
      this.#bucket.watch((change) => {
        if (!change.key.startsWith(REQUEST_PREFIX)) return;
        const id = change.key.slice(REQUEST_PREFIX.length);
        if (change.value === null) {
          this.#revisions.delete(id);
          this.#latest.delete(id);
          forget(id);
          return;
        }
        // A read may have seen a later revision than the watch delivers now: keep the later.
        if (change.revision < (this.#latest.get(id) ?? 0)) return;
        const record = this.#record(change.key, change.value);
        if (!record) return;
        this.#latest.set(id, change.revision);
        bound(this.#latest);
        apply(record);
      })
    );
  }

  #seen(id: string, revision: number): void {
    this.#revisions.set(id, revision);
    if (revision > (this.#latest.get(id) ?? 0)) this.#latest.set(id, revision);
    bound(this.#revisions);
  }

  #encode(record: ApprovalRecord): Uint8Array {
    const bytes = encodeJson(record);
    // The bucket's own bound would say so too, but not what to do about it.
    if (bytes.byteLength > 1024 * 1024 - 1024) {
      throw new GatewayError(
        "invalid_arguments",
        `The arguments of this ${record.tool} call are too large to queue for approval across ` +
          `replicas (${bytes.byteLength} bytes, over 1 MiB); send smaller arguments`,
      );
    }
    return bytes;
  }

  async #write(record: ApprovalRecord): Promise<void> {
    const revision = await this.#bucket.put(REQUEST_PREFIX + record.id, this.#encode(record));
    this.#seen(record.id, revision);
  }

  async #forget(id: string): Promise<void> {
    this.#revisions.delete(id);
    this.#latest.delete(id);
    await this.#bucket.delete(REQUEST_PREFIX + id);
  }

  /** The slots whose request is still pending on the shared state. */
  async #stillPending(slots: Slot[], now: number): Promise<Slot[]> {
    const records = await Promise.all(slots.map((s) => this.read(s.id)));
    return slots.filter((_, i) => records[i]?.status === "pending" && records[i]!.expiresAt > now);
  }

  /** Frees a decided request's slot in its tenant's document. */
  async #release(tenant: string, id: string): Promise<void> {
    const key = sharedKey("tenant", tenant);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const entry = await this.#bucket.get(key);
      if (!entry) return;
      const slots = this.#slots(key, entry.value);
      if (!slots.some((s) => s.id === id)) return;
      const next = encodeJson({ slots: slots.filter((s) => s.id !== id) });
      if (await this.#bucket.update(key, next, entry.revision) !== null) return;
    }
    throw new Error(`tenant "${tenant}"'s slots kept changing (${MAX_ATTEMPTS} attempts)`);
  }

  #slots(key: string, value: Uint8Array): Slot[] {
    try {
      const parsed = SLOTS.safeParse(decodeJson(value));
      if (parsed.success) return parsed.data.slots;
    } catch {
      // Not JSON: reported below.
    }
    // Rebuilt from the requests still pending: the bound counts again from here.
    this.#logger.warn(`shared approvals: ${key} is malformed; its pending slots start over`);
    return [];
  }

  #record(key: string, value: Uint8Array): ApprovalRecord | undefined {
    try {
      const parsed = APPROVAL_RECORD.safeParse(decodeJson(value));
      if (parsed.success && REQUEST_PREFIX + parsed.data.id === key) {
        return parsed.data as ApprovalRecord;
      }
    } catch {
      // Not JSON: reported below.
    }
    this.#logger.warn(`shared approvals: ${key} is not an approval record; it is ignored`);
    return undefined;
  }
}

/**
 * Keeps a revision map to MAX_REVISIONS ids, oldest first out: JetStream expires records without
 * telling watchers, so ids seen long ago would otherwise stay forever. A dropped id is read again.
 */
function bound(revisions: Map<string, number>): void {
  while (revisions.size > MAX_REVISIONS) revisions.delete(revisions.keys().next().value!);
}

/** Runs a bucket operation, turning an unreachable bucket into an error an operator can act on. */
async function unreachable<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    if (error instanceof GatewayError) throw error;
    throw new GatewayError(
      "internal",
      `The shared approvals (bucket ${APPROVALS_BUCKET}) cannot be reached: ` +
        `${(error as Error).message}; approval requests and decisions are refused until NATS ` +
        "JetStream answers again",
    );
  }
}
