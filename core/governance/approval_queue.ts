/**
 * The queue of calls waiting for a person's approval.
 *
 * A call that needs approval files a request here; an operator approves or denies it; on
 * approval the queue issues a single-use token bound to the request's tenant, tool and
 * arguments hash, which the requester fetches and retries the call with. Requests lapse after
 * a while and are pruned; the queue is bounded, in total, per tenant and per principal, so a
 * flood of requests cannot exhaust memory, one tenant crowd out the others, nor one caller
 * (a leaked API key, say) fill its tenant's share. The requester of a request can never
 * decide it (the same principal: credential kind and subject, and for a JWT its key source and
 * issuer; see TokenPayload.principal), whatever its scopes — the rule lives here so every route to
 * a decision obeys it; only in-band approval (the caller's own user answering an elicitation,
 * allowed where the call pipeline's policy says so) is exempt.
 * Events carry the arguments hash, never the raw arguments and never the token.
 *
 * Shared by replicas ({@link ApprovalQueue.share}, cluster mode), the map below mirrors the
 * backend's records and the asynchronous entry points ({@link ApprovalQueue.file},
 * {@link ApprovalQueue.refresh}, {@link ApprovalQueue.approve}, {@link ApprovalQueue.reject})
 * read and write the shared state: a request filed on one replica is decided on another, the
 * per-tenant and per-principal bounds are counted across all of them, and of two decisions
 * racing one wins.
 * @module
 */
import { coversTenant, sameCaller, samePrincipal } from "../auth/token_payload.ts";
import type { Clock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import type { EventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import type { ApprovalTokens } from "./approval_tokens.ts";
import { sha256HexSync } from "./canonical_json.ts";
import type { EffectClass } from "./policy.ts";

/** Default time a request waits for a decision: ten minutes. */
export const DEFAULT_APPROVAL_REQUEST_TTL_MS = 10 * 60 * 1000;
/** Default most pending requests at once. */
export const DEFAULT_MAX_PENDING_APPROVALS = 10_000;
/** Default most pending requests at once for one tenant (MCP_MAX_PENDING_APPROVALS_PER_TENANT). */
export const DEFAULT_MAX_PENDING_APPROVALS_PER_TENANT = 100;
/** Default most pending requests at once for one principal (MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL). */
export const DEFAULT_MAX_PENDING_APPROVALS_PER_PRINCIPAL = 20;

/** Where a request stands; `expired` means it lapsed while pending. */
export type ApprovalStatus = "pending" | "approved" | "denied" | "expired";

/** What a caller files: the call that needs approval. */
export interface ApprovalRequestInput {
  tenant: string;
  /** Who asked, by name (the caller's subject): shown, never compared. */
  subject: string;
  /**
   * Who asked, as callers are compared (TokenPayload.principal): only they may fetch the token,
   * and they may not decide it. A request filed without one is no one's to fetch.
   */
  principal?: string;
  tool: string;
  server?: string;
  effect: EffectClass;
  /** The raw arguments, shown to the approver; never published on the bus. */
  arguments: Record<string, unknown>;
  /** {@link argumentsHash} of `arguments`; the token is bound to it. */
  argumentsHash: string;
}

/** A request as the queue reports it (a snapshot: changing it changes nothing). */
export interface ApprovalRequest extends ApprovalRequestInput {
  id: string;
  status: ApprovalStatus;
  /** Epoch ms. */
  createdAt: number;
  /** Epoch ms after which a pending request can no longer be approved. */
  expiresAt: number;
  /** Who approved or denied it. */
  decidedBy?: string;
  /** Epoch ms of the decision. */
  decidedAt?: number;
  /** The approver's reason for a denial. */
  reason?: string;
  /** Epoch ms when the issued token expires (approved requests). */
  tokenExpiresAt?: number;
}

/** Options for {@link ApprovalQueue}. */
export interface ApprovalQueueOptions {
  clock: Clock;
  bus: EventBus;
  tokens: ApprovalTokens;
  /**
   * How long a request waits for a decision, and how long a settled one stays visible
   * afterwards; default {@link DEFAULT_APPROVAL_REQUEST_TTL_MS}.
   */
  ttlMs?: number;
  /** Most pending requests at once; default {@link DEFAULT_MAX_PENDING_APPROVALS}. */
  maxPending?: number;
  /**
   * Most pending requests at once for one tenant; default
   * {@link DEFAULT_MAX_PENDING_APPROVALS_PER_TENANT} (never more than `maxPending`).
   */
  maxPendingPerTenant?: number;
  /**
   * Most pending requests at once for one principal of a tenant (requests filed without a
   * principal are not counted); default {@link DEFAULT_MAX_PENDING_APPROVALS_PER_PRINCIPAL}
   * (never more than `maxPendingPerTenant`).
   */
  maxPendingPerPrincipal?: number;
  /**
   * Called after every change worth keeping across a restart (a request filed, approved or
   * denied). An approval waits for the returned promise, so an answered approve is on disk;
   * a rejection is the callee's to report, never the approver's.
   */
  onChange?: () => void | Promise<void>;
  /** This replica's id (cluster mode), carried by the approval events it publishes. */
  replica?: string;
}

/** A request as persisted: the snapshot fields plus the token, which only the requester sees. */
export interface ApprovalRecord extends ApprovalRequest {
  token?: string;
}

/** The internal record. */
type Entry = ApprovalRecord;

/** What {@link ApprovalBackend.admit} decided for a new request. */
export type Admission =
  /** The record to use: the new one, or an identical pending one another replica filed first. */
  | { record: ApprovalRecord }
  /** The tenant, or the requester, already has as many pending requests as its limit allows. */
  | { full: "tenant" | "principal" };

/** The bounds {@link ApprovalBackend.admit} enforces, counted across every replica. */
export interface AdmissionLimits {
  /** Most pending requests of the record's tenant. */
  tenant: number;
  /** Most pending requests of the record's principal (a record without one is not counted). */
  principal: number;
}

/** A store of approval records shared with other replicas. Every method rejects when it is unreachable. */
export interface ApprovalBackend {
  /**
   * Files `record` (pending) unless its tenant or its principal has as many pending requests as
   * `limits` allows, counted across every replica. `call` (64 hex digits, {@link sharedCallOf})
   * identifies identical requests (tenant, principal, tool, hash); its last 32 digits identify
   * the requester (tenant, principal), whose requests count towards `limits.principal`.
   */
  admit(
    record: ApprovalRecord,
    call: string,
    limits: AdmissionLimits,
    now: number,
  ): Promise<Admission>;
  /** The shared record now, or undefined when there is none (never filed, or expired). */
  read(id: string): Promise<ApprovalRecord | undefined>;
  /**
   * Compare-and-set: replaces the record as last read or admitted by this backend with `next`
   * (a decision); false when another replica wrote it first.
   */
  decide(next: ApprovalRecord): Promise<boolean>;
  /**
   * Calls `apply` with every record (the current ones first, then each write by any replica) and
   * `forget` with the id of each record deleted or expired, until the returned function runs.
   */
  watch(apply: (record: ApprovalRecord) => void, forget: (id: string) => void): Promise<() => void>;
}

/** Who decides a request: a name to show (`decidedBy`) and the principal compared with the requester's. */
export interface Decider {
  subject: string;
  principal: string;
  /**
   * The decider's tenant and scopes: it decides its own tenant's requests, and every tenant's
   * with `admin` or `all_tenants` ({@link coversTenant}); another tenant's request is not_found.
   */
  tenant: string;
  scopes: readonly string[];
}

/** How a decision was made; see {@link ApprovalQueue.approve}. */
export interface DecisionOptions {
  /**
   * The decision is the calling client's own user answering an in-band prompt (elicitation):
   * the requester ≠ approver rule does not apply. Only the call pipeline sets it, and only where
   * its policy allows in-band approval.
   */
  inBand?: boolean;
}

/** Pending requests at most this often trigger a full prune scan (clock ms). */
const PRUNE_INTERVAL_MS = 1000;
const HASH = /^[0-9a-f]{64}$/;

/** Pending approvals, their decisions and the tokens they yield. */
export class ApprovalQueue {
  readonly #clock: Clock;
  readonly #bus: EventBus;
  readonly #tokens: ApprovalTokens;
  readonly #ttlMs: number;
  readonly #maxPending: number;
  readonly #maxPendingPerTenant: number;
  readonly #maxPendingPerPrincipal: number;
  readonly #onChange: (() => void | Promise<void>) | undefined;
  /** Insertion order is creation order, which pruning and eviction rely on. */
  readonly #entries = new Map<string, Entry>();
  /** Pending request id by tenant, principal, tool and hash: identical requests share one. */
  readonly #pendingByCall = new Map<string, string>();
  /** Pending requests per tenant, kept in step with #pendingByCall. */
  readonly #pendingPerTenant = new Map<string, number>();
  /** Pending requests per tenant and principal ({@link principalKeyOf}), likewise. */
  readonly #pendingPerPrincipal = new Map<string, number>();
  /** Requests an approve() is issuing a token for: neither approvable nor deniable meanwhile. */
  readonly #deciding = new Set<string>();
  #prunedAt = Number.NEGATIVE_INFINITY;
  readonly #replica: string | undefined;
  #backend: ApprovalBackend | undefined;
  #unwatch: (() => void) | undefined;

  constructor(options: ApprovalQueueOptions) {
    const ttlMs = options.ttlMs ?? DEFAULT_APPROVAL_REQUEST_TTL_MS;
    if (!Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
      throw new RangeError(`ttlMs must be a positive integer of milliseconds, got ${ttlMs}`);
    }
    const maxPending = options.maxPending ?? DEFAULT_MAX_PENDING_APPROVALS;
    if (!Number.isSafeInteger(maxPending) || maxPending <= 0) {
      throw new RangeError(`maxPending must be a positive integer, got ${maxPending}`);
    }
    const perTenant = options.maxPendingPerTenant ?? DEFAULT_MAX_PENDING_APPROVALS_PER_TENANT;
    if (!Number.isSafeInteger(perTenant) || perTenant <= 0) {
      throw new RangeError(`maxPendingPerTenant must be a positive integer, got ${perTenant}`);
    }
    const perPrincipal = options.maxPendingPerPrincipal ??
      DEFAULT_MAX_PENDING_APPROVALS_PER_PRINCIPAL;
    if (!Number.isSafeInteger(perPrincipal) || perPrincipal <= 0) {
      throw new RangeError(
        `maxPendingPerPrincipal must be a positive integer, got ${perPrincipal}`,
      );
    }
    this.#clock = options.clock;
    this.#bus = options.bus;
    this.#tokens = options.tokens;
    this.#ttlMs = ttlMs;
    this.#maxPending = maxPending;
    this.#maxPendingPerTenant = Math.min(perTenant, maxPending);
    this.#maxPendingPerPrincipal = Math.min(perPrincipal, this.#maxPendingPerTenant);
    this.#onChange = options.onChange;
    this.#replica = options.replica;
  }

  /**
   * Shares the queue with other replicas through `backend`: from now on the records are the
   * backend's (mirrored here by its watch), requests are filed with {@link ApprovalQueue.file}
   * and denials made with {@link ApprovalQueue.reject}.
   */
  async share(backend: ApprovalBackend): Promise<void> {
    this.#backend = backend;
    this.#unwatch = await backend.watch(
      (record) => this.#absorb(record),
      (id) => this.#drop(id),
    );
  }

  /** Stops mirroring the shared records (shutdown). */
  close(): void {
    this.#unwatch?.();
    this.#unwatch = undefined;
  }

  /** Every request still held, with its raw status and token, oldest first (for persistence). */
  records(): ApprovalRecord[] {
    const now = this.#clock.now();
    return [...this.#entries.values()].filter((e) => this.#held(e, now)).map((e) => ({ ...e }));
  }

  /**
   * Takes back requests an earlier process kept (see approval_store.ts), oldest first; skips ids
   * already held and records nobody could learn anything from any more. Announces nothing: these
   * requests were announced when they were made. Returns how many were taken.
   */
  restore(records: readonly ApprovalRecord[]): number {
    const now = this.#clock.now();
    let taken = 0;
    for (const record of records) {
      if (this.#entries.has(record.id)) continue;
      const entry: Entry = { ...record };
      if (!this.#held(entry, now)) continue;
      this.#entries.set(entry.id, entry);
      if (this.#statusOf(entry, now) === "pending") this.#addPending(entry);
      taken++;
    }
    return taken;
  }

  /**
   * Files a request for approval and announces it (approval.requested). An identical pending
   * request (same tenant, principal, tool and arguments hash) is returned instead of a new one.
   * Throws approval_queue_full when `maxPending` requests are pending, `maxPendingPerTenant`
   * of the caller's tenant or `maxPendingPerPrincipal` of the caller, and none has lapsed.
   */
  request(input: ApprovalRequestInput): ApprovalRequest {
    this.#localOnly("request", "file");
    const now = this.#clock.now();
    const existing = this.#admissible(input, now, true);
    if (existing) return snapshot(existing, now);
    const entry = this.#newEntry(input, now);
    this.#entries.set(entry.id, entry);
    this.#addPending(entry);
    this.#evictSettled();
    this.#publish("approval.requested", entry, entry.expiresAt);
    void this.#changed();
    return snapshot(entry, now);
  }

  /**
   * {@link ApprovalQueue.request}, also when the queue is shared: the request is on the shared
   * state (its tenant's bound counted across replicas) before it is returned.
   */
  async file(input: ApprovalRequestInput): Promise<ApprovalRequest> {
    const backend = this.#backend;
    if (!backend) return this.request(input);
    const now = this.#clock.now();
    // The mirror may lag a write elsewhere by a moment: the tenant and principal bounds are the
    // backend's.
    const existing = this.#admissible(input, now, false);
    if (existing) return snapshot(existing, now);
    const entry = this.#newEntry(input, now);
    const admission = await backend.admit(entry, sharedCallOf(input), {
      tenant: this.#maxPendingPerTenant,
      principal: this.#maxPendingPerPrincipal,
    }, now);
    if ("full" in admission) {
      throw admission.full === "tenant"
        ? this.#tenantFull(input.tenant)
        : this.#principalFull(input.tenant, input.subject);
    }
    this.#absorb(admission.record);
    const kept = this.#entries.get(admission.record.id) ?? admission.record;
    if (kept.id === entry.id) this.#publish("approval.requested", kept, kept.expiresAt);
    return snapshot(kept, now);
  }

  /**
   * Brings request `id` up to date from the shared state before it is read or decided here
   * (another replica may have filed or decided it a moment ago); nothing to do unshared.
   */
  async refresh(id: string): Promise<void> {
    if (!this.#backend) return;
    const record = await this.#backend.read(id);
    if (record) this.#absorb(record);
    else this.#drop(id);
  }

  /** Checks a new request; returns an identical pending one, or throws when a bound is reached. */
  #admissible(input: ApprovalRequestInput, now: number, countHere: boolean): Entry | undefined {
    for (const field of ["tenant", "subject", "tool"] as const) {
      if (typeof input[field] !== "string" || input[field] === "") {
        throw new TypeError(`An approval request needs a non-empty ${field}`);
      }
    }
    if (!HASH.test(input.argumentsHash)) {
      throw new TypeError("argumentsHash must be 64 lowercase hex digits (see argumentsHash())");
    }
    this.#prune(now, false);
    const existingId = this.#pendingByCall.get(callKeyOf(input));
    const existing = existingId === undefined ? undefined : this.#find(existingId, now);
    if (existing && this.#statusOf(existing, now) === "pending") return existing;

    const tenantFull = () =>
      countHere &&
      (this.#pendingPerTenant.get(input.tenant) ?? 0) >= this.#maxPendingPerTenant;
    const principalFull = () =>
      countHere && input.principal !== undefined &&
      (this.#pendingPerPrincipal.get(principalKeyOf(input)) ?? 0) >=
        this.#maxPendingPerPrincipal;
    if (this.#pendingByCall.size >= this.#maxPending || tenantFull() || principalFull()) {
      this.#prune(now, true);
    }
    if (this.#pendingByCall.size >= this.#maxPending) {
      throw new GatewayError(
        "approval_queue_full",
        `${this.#maxPending} approval requests are already waiting; ask an operator to ` +
          "approve or deny some, or retry after older requests lapse",
        { maxPending: this.#maxPending },
      );
    }
    if (tenantFull()) throw this.#tenantFull(input.tenant);
    if (principalFull()) throw this.#principalFull(input.tenant, input.subject);
    return undefined;
  }

  #tenantFull(tenant: string): GatewayError {
    return new GatewayError(
      "approval_queue_full",
      `Tenant "${tenant}" already has ${this.#maxPendingPerTenant} approval requests ` +
        "waiting (MCP_MAX_PENDING_APPROVALS_PER_TENANT); ask an operator to approve or deny " +
        "some, or retry after older requests lapse",
      { tenant, maxPendingPerTenant: this.#maxPendingPerTenant },
    );
  }

  #principalFull(tenant: string, subject: string): GatewayError {
    return new GatewayError(
      "approval_queue_full",
      `"${subject}" of tenant "${tenant}" already has ${this.#maxPendingPerPrincipal} approval ` +
        "requests waiting (MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL); ask an operator to approve " +
        "or deny some, or retry after older requests lapse",
      { tenant, subject, maxPendingPerPrincipal: this.#maxPendingPerPrincipal },
    );
  }

  #newEntry(input: ApprovalRequestInput, now: number): Entry {
    return {
      id: crypto.randomUUID(),
      tenant: input.tenant,
      subject: input.subject,
      ...(input.principal === undefined ? {} : { principal: input.principal }),
      tool: input.tool,
      ...(input.server === undefined ? {} : { server: input.server }),
      effect: input.effect,
      arguments: input.arguments,
      argumentsHash: input.argumentsHash,
      status: "pending",
      createdAt: now,
      expiresAt: now + this.#ttlMs,
    };
  }

  /** A request by id, or undefined if unknown or already pruned. */
  get(id: string): ApprovalRequest | undefined {
    const now = this.#clock.now();
    this.#prune(now, false);
    const entry = this.#find(id, now);
    return entry ? snapshot(entry, now) : undefined;
  }

  /** Requests still held, oldest first, optionally only those with `status`. */
  list(filter: { status?: ApprovalStatus } = {}): ApprovalRequest[] {
    const now = this.#clock.now();
    this.#prune(now, false);
    const out: ApprovalRequest[] = [];
    for (const entry of this.#entries.values()) {
      if (!this.#held(entry, now)) continue;
      if (filter.status === undefined || this.#statusOf(entry, now) === filter.status) {
        out.push(snapshot(entry, now));
      }
    }
    return out;
  }

  /**
   * Approves a pending request and issues its single-use token, bound to the request's tenant,
   * tool and arguments hash; announces approval.approved (without the token). Throws not_found,
   * approval_expired (lapsed before the decision), approval_not_pending (already decided) or
   * self_approval (`by` is the requester, unless `options.inBand`).
   */
  async approve(
    id: string,
    decider: Decider,
    options: DecisionOptions = {},
  ): Promise<{ token: string; expiresAt: number }> {
    const by = requireApprover(decider);
    await this.refresh(id);
    const now = this.#clock.now();
    const entry = this.#decidable(id, now, decider, options, "approve");
    this.#deciding.add(id);
    let issued: { token: string; expiresAt: number };
    try {
      issued = await this.#tokens.issue({
        tenant: entry.tenant,
        tool: entry.tool,
        argumentsHash: entry.argumentsHash,
        requestId: entry.id,
      });
      await this.#commit(entry, {
        ...entry,
        status: "approved",
        decidedBy: by,
        decidedAt: now,
        token: issued.token,
        tokenExpiresAt: issued.expiresAt,
      });
    } finally {
      this.#deciding.delete(id);
    }
    this.#settle(entry, now, by);
    entry.status = "approved";
    entry.token = issued.token;
    entry.tokenExpiresAt = issued.expiresAt;
    this.#publish("approval.approved", entry, issued.expiresAt, { by });
    await this.#changed();
    return issued;
  }

  /**
   * Denies a pending request and announces approval.denied with the reason. Throws like
   * {@link ApprovalQueue.approve}.
   */
  deny(
    id: string,
    decider: Decider,
    reason?: string,
    options: DecisionOptions = {},
  ): ApprovalRequest {
    this.#localOnly("deny", "reject");
    const by = requireApprover(decider);
    const now = this.#clock.now();
    return this.#denied(this.#decidable(id, now, decider, options, "deny"), now, by, reason);
  }

  /**
   * {@link ApprovalQueue.deny}, also when the queue is shared: the denial is a compare-and-set
   * on the shared record, so a decision made meanwhile on another replica wins and this one
   * throws approval_not_pending naming it.
   */
  async reject(
    id: string,
    decider: Decider,
    reason?: string,
    options: DecisionOptions = {},
  ): Promise<ApprovalRequest> {
    if (!this.#backend) return this.deny(id, decider, reason, options);
    const by = requireApprover(decider);
    await this.refresh(id);
    const now = this.#clock.now();
    const entry = this.#decidable(id, now, decider, options, "deny");
    this.#deciding.add(id);
    try {
      await this.#commit(entry, {
        ...entry,
        status: "denied",
        decidedBy: by,
        decidedAt: now,
        ...(reason === undefined || reason === "" ? {} : { reason }),
      });
    } finally {
      this.#deciding.delete(id);
    }
    return this.#denied(entry, now, by, reason);
  }

  #denied(entry: Entry, now: number, by: string, reason: string | undefined): ApprovalRequest {
    this.#settle(entry, now, by);
    entry.status = "denied";
    if (reason !== undefined && reason !== "") entry.reason = reason;
    this.#publish("approval.denied", entry, entry.expiresAt, {
      by,
      ...(entry.reason === undefined ? {} : { reason: entry.reason }),
    });
    void this.#changed();
    return snapshot(entry, now);
  }

  /**
   * The token of an approved request, for the caller who asked for it ({@link sameCaller}: same
   * tenant and principal); anyone else gets not_found, so ids reveal nothing, and so does everyone
   * for a request without a principal (filed by an older replica or process). Fetching again
   * returns the same token: it is single-use when redeemed, not when fetched. Throws
   * approval_pending, approval_denied or approval_expired when there is no token to give.
   */
  tokenFor(id: string, caller: { tenant: string; principal: string }): {
    token: string;
    expiresAt: number;
  } {
    const now = this.#clock.now();
    this.#prune(now, false);
    const entry = this.#find(id, now);
    if (!entry || !sameCaller(entry, caller)) throw notFound(id);
    const status = this.#statusOf(entry, now);
    if (status === "pending") {
      throw new GatewayError(
        "approval_pending",
        `Approval request "${id}" for "${entry.tool}" is still waiting for an operator; ask ` +
          `one to approve it before ${new Date(entry.expiresAt).toISOString()}, then fetch the ` +
          "token again",
        { id, expiresAt: entry.expiresAt },
      );
    }
    if (status === "denied") {
      throw new GatewayError(
        "approval_denied",
        `Approval request "${id}" for "${entry.tool}" was denied` +
          (entry.reason ? `: ${entry.reason}` : "") + "; do not retry the call as is",
        { id, ...(entry.reason ? { reason: entry.reason } : {}) },
      );
    }
    if (status === "expired" || entry.token === undefined || entry.tokenExpiresAt === undefined) {
      throw expired(id, entry.tool);
    }
    if (now >= entry.tokenExpiresAt) {
      throw new GatewayError(
        "approval_expired",
        `The token for approval request "${id}" expired at ` +
          `${new Date(entry.tokenExpiresAt).toISOString()}; call "${entry.tool}" again to ` +
          "request a new approval",
        { id },
      );
    }
    return { token: entry.token, expiresAt: entry.tokenExpiresAt };
  }

  /**
   * Writes a decision to the shared state (nothing to do unshared); when another replica decided
   * first, takes its decision in and throws approval_not_pending naming it.
   */
  async #commit(entry: Entry, next: Entry): Promise<void> {
    if (!this.#backend || await this.#backend.decide(next)) return;
    await this.refresh(entry.id);
    const winner = this.#entries.get(entry.id);
    const status = winner ? this.#statusOf(winner, this.#clock.now()) : "expired";
    throw new GatewayError(
      "approval_not_pending",
      `Approval request "${entry.id}" was ${status}` +
        (winner?.decidedBy ? ` by ${winner.decidedBy}` : "") +
        " at the same moment, on another replica; that decision stands and this one did not count",
      { id: entry.id, status },
    );
  }

  /** Takes in a record of the shared state: the map mirrors it, in place so holders see it. */
  #absorb(record: ApprovalRecord): void {
    const held = this.#entries.get(record.id);
    let entry: Entry;
    if (held) {
      for (const k of Object.keys(held)) delete (held as unknown as Record<string, unknown>)[k];
      entry = Object.assign(held, record);
    } else {
      entry = { ...record };
      this.#entries.set(entry.id, entry);
    }
    if (this.#statusOf(entry, this.#clock.now()) === "pending") this.#addPending(entry);
    else this.#forgetPending(entry);
    this.#evictSettled();
  }

  /** A shared record deleted or expired: it is gone here too. */
  #drop(id: string): void {
    const entry = this.#entries.get(id);
    if (!entry || this.#deciding.has(id)) return;
    this.#forgetPending(entry);
    this.#entries.delete(id);
  }

  /** Refuses the synchronous, local-only entry points on a shared queue. */
  #localOnly(method: string, instead: string): void {
    if (this.#backend) {
      throw new Error(
        `ApprovalQueue.${method}() is for an unshared queue; a shared one (cluster mode) is ` +
          `written through ${instead}()`,
      );
    }
  }

  /** Tells the persistence hook; it reports its own failures, so they are swallowed here. */
  async #changed(): Promise<void> {
    try {
      await this.#onChange?.();
    } catch {
      // Reported by the hook (see onChange).
    }
  }

  /** The entry if `by` can decide it now, else the error saying why not. */
  #decidable(
    id: string,
    now: number,
    decider: Decider,
    options: DecisionOptions,
    action: "approve" | "deny",
  ): Entry {
    this.#prune(now, false);
    const entry = this.#find(id, now);
    // Another tenant's request is unknown to a decider confined to its own: ids reveal nothing.
    if (!entry || !coversTenant(decider, entry.tenant)) throw notFound(id);
    if (options.inBand !== true && mayBeRequester(entry, decider)) {
      const by = decider.subject;
      throw new GatewayError(
        "self_approval",
        `"${by}" asked for approval request "${id}" and so cannot ${action} it, whatever its ` +
          "scopes; ask another person with scope approver (or admin), using their own token, " +
          "to decide it",
        { id, subject: by },
      );
    }
    if (this.#deciding.has(id)) {
      throw new GatewayError(
        "approval_not_pending",
        `Approval request "${id}" is being approved right now; list it again to see the outcome`,
        { id, status: "pending" },
      );
    }
    const status = this.#statusOf(entry, now);
    if (status === "expired") throw expired(id, entry.tool);
    if (status !== "pending") {
      throw new GatewayError(
        "approval_not_pending",
        `Approval request "${id}" was already ${status}` +
          (entry.decidedBy ? ` by ${entry.decidedBy}` : "") + "; nothing to do",
        { id, status },
      );
    }
    return entry;
  }

  /** Records the decision and frees the identical-request slot. */
  #settle(entry: Entry, now: number, by: string): void {
    entry.decidedBy = by;
    entry.decidedAt = now;
    this.#forgetPending(entry);
  }

  #addPending(entry: Entry): void {
    const callKey = callKeyOf(entry);
    const previous = this.#pendingByCall.get(callKey);
    if (previous === entry.id) return;
    if (previous === undefined) {
      increment(this.#pendingPerTenant, entry.tenant, 1);
      if (entry.principal !== undefined) {
        increment(this.#pendingPerPrincipal, principalKeyOf(entry), 1);
      }
    }
    this.#pendingByCall.set(callKey, entry.id);
  }

  #forgetPending(entry: Entry): void {
    const callKey = callKeyOf(entry);
    if (this.#pendingByCall.get(callKey) !== entry.id) return;
    this.#pendingByCall.delete(callKey);
    increment(this.#pendingPerTenant, entry.tenant, -1);
    if (entry.principal !== undefined) {
      increment(this.#pendingPerPrincipal, principalKeyOf(entry), -1);
    }
  }

  /** Status now: a pending request past its expiry has lapsed even before pruning sees it. */
  #statusOf(entry: Entry, now: number): ApprovalStatus {
    return entry.status === "pending" && now >= entry.expiresAt ? "expired" : entry.status;
  }

  /**
   * Frees the slots of lapsed requests, and drops records once nobody can learn anything from
   * them: a lapsed, denied or approved request is kept for one more `ttlMs` after it lapsed,
   * was denied or its token expired, so whoever asks gets "expired" or "denied" rather than
   * "not found". Scans at most once per PRUNE_INTERVAL_MS unless `force` (the queue is full),
   * so a busy queue does not pay O(n) on every call.
   */
  #prune(now: number, force: boolean): void {
    if (!force && now - this.#prunedAt < PRUNE_INTERVAL_MS) return;
    this.#prunedAt = now;
    for (const entry of this.#entries.values()) {
      if (this.#deciding.has(entry.id)) continue;
      const status = this.#statusOf(entry, now);
      if (status === "pending") continue;
      if (status === "expired") this.#forgetPending(entry);
      if (!this.#held(entry, now)) this.#entries.delete(entry.id);
    }
  }

  /** The entry if still held: pruning is periodic, so retention is also checked per lookup. */
  #find(id: string, now: number): Entry | undefined {
    const entry = this.#entries.get(id);
    return entry && this.#held(entry, now) ? entry : undefined;
  }

  #held(entry: Entry, now: number): boolean {
    return this.#deciding.has(entry.id) || now < this.#retainUntil(entry);
  }

  #retainUntil(entry: Entry): number {
    if (entry.status === "approved") return (entry.tokenExpiresAt ?? 0) + this.#ttlMs;
    if (entry.status === "denied") return (entry.decidedAt ?? 0) + this.#ttlMs;
    return entry.expiresAt + this.#ttlMs;
  }

  /**
   * Bounds the records that are no longer pending (kept for token pickup and answers) to
   * `maxPending` as well: past it the oldest go first (a requester who never picked up its
   * token must ask again), so approving quickly cannot grow memory without bound.
   */
  #evictSettled(): void {
    let excess = this.#entries.size - this.#pendingByCall.size - this.#maxPending;
    if (excess <= 0) return;
    for (const entry of this.#entries.values()) {
      if (excess <= 0) break;
      if (this.#deciding.has(entry.id) || this.#pendingByCall.get(callKeyOf(entry)) === entry.id) {
        continue;
      }
      this.#entries.delete(entry.id);
      excess--;
    }
  }

  #publish(
    type: "approval.requested" | "approval.approved" | "approval.denied",
    entry: Entry,
    expiresAt: number,
    extra: { by?: string; reason?: string } = {},
  ): void {
    const event: GatewayEvent = {
      type,
      id: entry.id,
      tenant: entry.tenant,
      subject: entry.subject,
      tool: entry.tool,
      ...(entry.server === undefined ? {} : { server: entry.server }),
      effect: entry.effect,
      argumentsHash: entry.argumentsHash,
      expiresAt,
      ...extra,
      ...(this.#replica === undefined ? {} : { replica: this.#replica }),
    };
    this.#bus.publish(event);
  }
}

/**
 * Identical requests share this key: same tenant, principal, tool and arguments hash (by subject,
 * one caller would be handed the pending request of another that bears the same name).
 */
function callKeyOf(r: ApprovalRequestInput): string {
  return [r.tenant, r.principal ?? "", r.tool, r.argumentsHash].join("\0");
}

/** Whose requests count together towards the per-principal bound: tenant and principal. */
function principalKeyOf(r: ApprovalRequestInput): string {
  return `${r.tenant}\0${r.principal ?? ""}`;
}

/**
 * The shared state's `call` of a request: 32 hex digits of the {@link callKeyOf} hash, then 32 of
 * the requester's ({@link principalKeyOf}), so a backend counts a principal's slots without a
 * field older replicas would refuse. A request without a principal is its own requester: its
 * call is the whole call hash, which no other request's last half matches.
 */
export function sharedCallOf(r: ApprovalRequestInput): string {
  const call = sha256HexSync(callKeyOf(r));
  return r.principal === undefined
    ? call
    : call.slice(0, 32) + sha256HexSync(principalKeyOf(r)).slice(0, 32);
}

/** Adds `by` to `key`'s count, dropping counts that reach zero. */
function increment(counts: Map<string, number>, key: string, by: number): void {
  const next = (counts.get(key) ?? 0) + by;
  if (next > 0) counts.set(key, next);
  else counts.delete(key);
}

/**
 * Whether the decider may be the requester, so the decision is refused. A request without a
 * principal (filed by an older replica or process) cannot say who asked: then a decider of the
 * same name counts as the requester, so the rule fails closed both ways (such a request's token is
 * no one's either, see {@link ApprovalQueue.tokenFor}).
 */
function mayBeRequester(entry: Entry, decider: Decider): boolean {
  if (entry.principal === undefined) return entry.subject === decider.subject;
  return samePrincipal(entry, decider);
}

/** The name a decision is recorded under; throws when the decider has none to show or compare. */
function requireApprover(decider: Decider): string {
  const { subject, principal } = decider ?? {};
  if (typeof subject !== "string" || subject.trim() === "" || typeof principal !== "string") {
    throw new TypeError("An approval decision needs the approver's identity (subject, principal)");
  }
  return subject;
}

function snapshot(entry: Entry, now: number): ApprovalRequest {
  const { token: _token, ...rest } = entry;
  return {
    ...rest,
    status: entry.status === "pending" && now >= entry.expiresAt ? "expired" : entry.status,
  };
}

function notFound(id: string): GatewayError {
  return new GatewayError(
    "not_found",
    `No approval request "${id}"; it may have lapsed and been pruned; call the tool again to ` +
      "request a new approval",
    { id },
  );
}

function expired(id: string, tool: string): GatewayError {
  return new GatewayError(
    "approval_expired",
    `Approval request "${id}" lapsed before anyone decided it; call "${tool}" again to request ` +
      "a new approval",
    { id },
  );
}
