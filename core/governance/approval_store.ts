/**
 * Keeps approvals across restarts: pending requests, decisions (with the tokens their requesters
 * have yet to fetch) and the nonces of tokens already redeemed, in one JSON file.
 *
 * Without the nonces a restart would make every redeemed token good once more; without the
 * requests an operator's queue would empty on every deploy. The file is replaced atomically (a
 * temp file in the same directory, fsync, rename), so a crash leaves the old or the new state,
 * never half of one; it holds unredeemed tokens, so it is created readable by its owner only.
 * A file that does not parse is never overwritten: it is moved aside as `<file>.corrupt-<time>`,
 * the gateway starts with no approvals and says so loudly, and the file can be repaired and put
 * back while the gateway is stopped.
 * @module
 */
import { z } from "zod";
import type { Clock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import type { ApprovalRecord } from "./approval_queue.ts";

/** A redeemed token's nonce and when the token expires (it matters until then). */
export interface NonceRecord {
  nonce: string;
  expiresAt: number;
}

/** Everything the file keeps. */
export interface ApprovalState {
  approvals: ApprovalRecord[];
  nonces: NonceRecord[];
}

/** What {@link ApprovalStore.load} found. */
export interface LoadedApprovals extends ApprovalState {
  /** Records and nonces left out because they had expired. */
  dropped: number;
  /** Where an unreadable file was moved, when it was. */
  corruptMovedTo?: string;
}

/** Options for {@link ApprovalStore}. */
export interface ApprovalStoreOptions {
  path: string;
  clock: Clock;
  logger: Logger;
  /** The state to write; read when a write starts, so one write covers every earlier change. */
  snapshot: () => ApprovalState;
}

const FILE_VERSION = 1;

/** The shape of one kept approval record (file or shared bucket): what is read back is checked. */
export const APPROVAL_RECORD = z.object({
  id: z.string().min(1),
  tenant: z.string().min(1),
  subject: z.string().min(1),
  // Absent in the records of older versions: such a request is no one's (see ApprovalQueue).
  principal: z.string().min(1).optional(),
  tool: z.string().min(1),
  server: z.string().optional(),
  effect: z.enum(["read", "write", "destructive"]),
  arguments: z.record(z.string(), z.unknown()),
  argumentsHash: z.string().regex(/^[0-9a-f]{64}$/),
  status: z.enum(["pending", "approved", "denied", "expired"]),
  createdAt: z.number(),
  expiresAt: z.number(),
  decidedBy: z.string().optional(),
  decidedAt: z.number().optional(),
  reason: z.string().optional(),
  tokenExpiresAt: z.number().optional(),
  token: z.string().optional(),
}).strict();

const FILE = z.object({
  version: z.literal(FILE_VERSION),
  savedAt: z.string().optional(),
  approvals: z.array(APPROVAL_RECORD),
  nonces: z.array(z.object({ nonce: z.string().min(1), expiresAt: z.number() }).strict()),
}).strict();

/** The approvals file: load once at start, then {@link ApprovalStore.save} after each change. */
export class ApprovalStore {
  readonly path: string;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #snapshot: () => ApprovalState;
  /** The write in progress (or the last one), and the one queued behind it. */
  #writing: Promise<void> = Promise.resolve();
  #queued: Promise<void> | undefined;

  constructor(options: ApprovalStoreOptions) {
    this.path = options.path;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#snapshot = options.snapshot;
  }

  /**
   * Reads the file; a missing file is an empty state. Expired requests, tokens and nonces are
   * left out. A file that does not parse or validate is moved aside and an empty state returned;
   * a file that cannot be read, or moved aside, stops the start with `config_invalid`.
   */
  async load(): Promise<LoadedApprovals> {
    let text: string;
    try {
      text = await Deno.readTextFile(this.path);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return { approvals: [], nonces: [], dropped: 0 };
      throw new GatewayError(
        "config_invalid",
        `Cannot read the approvals file ${this.path}: ${(error as Error).message}; fix its ` +
          "permissions, or point MCP_APPROVALS_PATH at another file",
      );
    }
    const problem = parseProblem(text);
    if (typeof problem === "string") return await this.#setAside(problem);
    const now = this.#clock.now();
    const approvals = problem.approvals.filter((r) => !lapsed(r as ApprovalRecord, now));
    const nonces = problem.nonces.filter((n) => n.expiresAt > now);
    const dropped = problem.approvals.length - approvals.length +
      problem.nonces.length - nonces.length;
    return { approvals: approvals as ApprovalRecord[], nonces, dropped };
  }

  /**
   * Writes the current state soon; resolves once a write that includes every change made before
   * the call is on disk, rejects (with the file named) if that write fails. Calls made while a
   * write runs share the next one.
   */
  save(): Promise<void> {
    if (this.#queued) return this.#queued;
    const next = this.#writing.catch(() => {}).then(() => {
      this.#queued = undefined;
      return this.#write(this.#snapshot());
    });
    this.#queued = next;
    this.#writing = next;
    return next;
  }

  /** Waits for writes in flight (for shutdown); their failures were already reported. */
  async flush(): Promise<void> {
    await this.#writing.catch(() => {});
  }

  async #write(state: ApprovalState): Promise<void> {
    const document = {
      version: FILE_VERSION,
      savedAt: new Date(this.#clock.now()).toISOString(),
      approvals: state.approvals,
      nonces: state.nonces,
    };
    const slash = this.path.lastIndexOf("/");
    const dir = slash === -1 ? "." : this.path.slice(0, slash) || "/";
    const temp = `${dir}/.${this.path.slice(slash + 1)}.${crypto.randomUUID()}.tmp`;
    try {
      await Deno.mkdir(dir, { recursive: true });
      const file = await Deno.open(temp, { write: true, createNew: true, mode: 0o600 });
      try {
        await file.write(new TextEncoder().encode(JSON.stringify(document, null, 2) + "\n"));
        await file.sync();
      } finally {
        file.close();
      }
      await Deno.rename(temp, this.path);
    } catch (error) {
      await Deno.remove(temp).catch(() => {});
      const message = `Cannot save approvals to ${this.path}: ${(error as Error).message}; ` +
        "free space or fix the directory's permissions (approvals made meanwhile live in memory " +
        "only and are lost on restart)";
      this.#logger.error(message);
      throw new GatewayError("internal", message);
    }
  }

  /** Moves an unreadable file out of the way, keeping every byte of it, and starts empty. */
  async #setAside(problem: string): Promise<LoadedApprovals> {
    const stamp = new Date(this.#clock.now()).toISOString().replaceAll(":", "-");
    const aside = `${this.path}.corrupt-${stamp}`;
    try {
      await Deno.rename(this.path, aside);
    } catch (error) {
      throw new GatewayError(
        "config_invalid",
        `The approvals file ${this.path} is corrupt (${problem}) and cannot be moved aside ` +
          `(${(error as Error).message}); move or repair it by hand, then start again`,
      );
    }
    this.#logger.error(
      `APPROVALS FILE CORRUPT: ${this.path} ${problem}. It was moved to ${aside} and the ` +
        "gateway started with NO approvals: pending requests and unfetched tokens in it are not " +
        `served, and tokens it records as used could be redeemed again. Stop the gateway, repair ` +
        `the file and move it back to ${this.path} to restore them.`,
    );
    return { approvals: [], nonces: [], dropped: 0, corruptMovedTo: aside };
  }
}

/** The parsed file, or what is wrong with it. */
function parseProblem(text: string): z.infer<typeof FILE> | string {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return `is not JSON (${(error as Error).message})`;
  }
  const parsed = FILE.safeParse(json);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const where = issue.path.length > 0 ? ` at ${issue.path.join(".")}` : "";
  return `is not an approvals file of version ${FILE_VERSION} (${issue.message}${where})`;
}

/** Whether a kept record can no longer be acted on: lapsed while pending, or its token expired. */
function lapsed(record: ApprovalRecord, now: number): boolean {
  if (record.status === "pending" || record.status === "expired") return now >= record.expiresAt;
  if (record.status === "approved") return now >= (record.tokenExpiresAt ?? 0);
  return false;
}
