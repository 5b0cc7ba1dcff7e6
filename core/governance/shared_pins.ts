/**
 * SharedPins: the scanner's pins and quarantine decisions shared by replicas (cluster mode), in
 * the `agent33_pins` bucket, so a tool quarantined on one replica is quarantined on all.
 *
 * - `pin.<server>.<tool>`: the hash of the definition first seen, created by whichever replica
 *   sees the tool first (compare-and-set create: the others compare against it);
 * - `quarantine.<server>.<tool>`: a changed definition's quarantine, with its reason;
 * - `release.<server>.<tool>`: an operator's release; its hash is the tool's pin from then on.
 *
 * The scanner's decisions stay synchronous: writes go out in the background and every replica
 * (the writer too) applies what the watch delivers. A write that fails is logged; it fails
 * closed, since a quarantine applies locally whatever the bucket says and a release that does not
 * reach the bucket leaves the tool quarantined elsewhere. What is read back is checked.
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
import type { Logger } from "../support/logger.ts";

/** The bucket the replicas share pins and quarantines in. */
export const PINS_BUCKET = "agent33_pins";
/** Most decisions mirrored: far beyond any fleet's tools, a bound against a hostile bucket. */
const MAX_MIRRORED = 100_000;

const NAME = z.string().min(1).max(512);
const HASH = z.string().regex(/^[0-9a-f]{64}$/);
const PIN = z.object({ server: NAME, tool: NAME, hash: HASH }).strict();
const QUARANTINE = z.object({
  server: NAME,
  tool: NAME,
  hash: HASH,
  reason: z.string().min(1).max(4000),
  replica: z.string().max(256).optional(),
}).strict();
const RELEASE = z.object({ server: NAME, tool: NAME, hash: HASH, by: z.string().max(512) })
  .strict();

/** A shared decision about one tool, as the scanner applies it. */
export type PinChange =
  | { kind: "pin"; server: string; tool: string; hash: string }
  | { kind: "quarantine"; server: string; tool: string; hash: string; reason: string }
  | { kind: "release"; server: string; tool: string; hash: string; by: string };

/** What the gateway's scanner shares with the other replicas. */
export interface ScannerSharedState {
  /** First sight of a tool: pins `hash` unless another replica pinned it first. */
  pin(server: string, tool: string, hash: string): void;
  /** A changed definition (`hash`) is quarantined on every replica. */
  quarantine(server: string, tool: string, hash: string, reason: string): void;
  /** An operator's release: every replica serves the tool again, pinned at `hash`. */
  release(server: string, tool: string, hash: string, by: string): void;
  /** Calls `handler` with every current decision, then each new one, until the returned function runs. */
  subscribe(handler: (change: PinChange) => void): () => void;
}

type Kind = PinChange["kind"];

/** Pins and quarantines in a shared bucket. */
export class SharedPins implements ScannerSharedState {
  readonly #bucket: SharedBucket;
  readonly #logger: Logger;
  readonly #replica: string | undefined;
  readonly #mirror = new Map<string, PinChange>();
  readonly #handlers = new Set<(change: PinChange) => void>();
  #unwatch: (() => void) | undefined;

  private constructor(bucket: SharedBucket, logger: Logger, replica: string | undefined) {
    this.#bucket = bucket;
    this.#logger = logger;
    this.#replica = replica;
  }

  /** Opens the bucket and mirrors it (the current decisions are here when this resolves). */
  static async open(
    shared: SharedState,
    options: { logger: Logger; replica?: string },
  ): Promise<SharedPins> {
    const pins = new SharedPins(
      await shared.bucket(PINS_BUCKET),
      options.logger,
      options.replica,
    );
    pins.#unwatch = await pins.#bucket.watch((change) => {
      if (change.value === null) {
        pins.#mirror.delete(change.key);
        return;
      }
      const decision = pins.#parse(change.key, change.value);
      if (!decision) return;
      if (pins.#mirror.size >= MAX_MIRRORED && !pins.#mirror.has(change.key)) {
        pins.#logger.warn(`shared pins: over ${MAX_MIRRORED} decisions; ${change.key} ignored`);
        return;
      }
      pins.#mirror.set(change.key, decision);
      for (const handler of [...pins.#handlers]) handler(decision);
    });
    return pins;
  }

  pin(server: string, tool: string, hash: string): void {
    this.#write(
      "pin",
      server,
      tool,
      () => this.#bucket.create(keyOf("pin", server, tool), encodeJson({ server, tool, hash })),
    );
  }

  quarantine(server: string, tool: string, hash: string, reason: string): void {
    const record = {
      server,
      tool,
      hash,
      reason: reason.slice(0, 4000),
      ...(this.#replica === undefined ? {} : { replica: this.#replica }),
    };
    this.#write("quarantine", server, tool, async () => {
      await this.#bucket.put(keyOf("quarantine", server, tool), encodeJson(record));
      await this.#bucket.delete(keyOf("release", server, tool));
    });
  }

  release(server: string, tool: string, hash: string, by: string): void {
    this.#write("release", server, tool, async () => {
      await this.#bucket.put(
        keyOf("release", server, tool),
        encodeJson({ server, tool, hash, by: by.slice(0, 512) }),
      );
      await this.#bucket.delete(keyOf("quarantine", server, tool));
      await this.#bucket.put(keyOf("pin", server, tool), encodeJson({ server, tool, hash }));
    });
  }

  subscribe(handler: (change: PinChange) => void): () => void {
    for (const change of this.#mirror.values()) handler(change);
    this.#handlers.add(handler);
    return () => void this.#handlers.delete(handler);
  }

  /** Stops the watch. */
  close(): void {
    this.#unwatch?.();
    this.#unwatch = undefined;
    this.#handlers.clear();
  }

  #write(kind: Kind, server: string, tool: string, write: () => Promise<unknown>): void {
    write().catch((error) =>
      this.#logger.error(
        `shared pins: the ${kind} of ${server}/${tool} did not reach the other replicas ` +
          `(bucket ${PINS_BUCKET}: ${(error as Error).message}); it holds on this replica only`,
      )
    );
  }

  #parse(key: string, value: Uint8Array): PinChange | undefined {
    const kind = key.slice(0, key.indexOf(".")) as Kind;
    const schema = kind === "pin" ? PIN : kind === "quarantine" ? QUARANTINE : RELEASE;
    let decision: PinChange | undefined;
    try {
      const parsed = schema.safeParse(decodeJson(value));
      if (parsed.success && (kind === "pin" || kind === "quarantine" || kind === "release")) {
        const { server, tool } = parsed.data;
        if (keyOf(kind, server, tool) === key) decision = { kind, ...parsed.data } as PinChange;
      }
    } catch {
      // Not JSON: reported below.
    }
    if (!decision) this.#logger.warn(`shared pins: ${key} is not a pin decision; it is ignored`);
    return decision;
  }
}

function keyOf(kind: Kind, server: string, tool: string): string {
  return sharedKey(kind, server, tool);
}
