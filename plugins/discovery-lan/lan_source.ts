/**
 * Finds MCP servers on the local network through mDNS/DNS-SD: it asks for `_mcp._tcp.local`
 * and reads each answer's SRV (host and port), TXT (`path=/mcp`, `transport=http|sse`) and A/AAAA
 * records. Uses the `multicast-dns` package; the socket is opened per query and closed after.
 * @module
 */
// Pinned inline until deno.json's import map gains "multicast-dns" (that file is not this plugin's).
import {
  type Clock,
  type DiscoveryCandidate,
  type DiscoverySource,
  type Logger,
  systemClock,
  type TimerHandle,
} from "../../core/plugin_api/mod.ts";

/** The DNS-SD service type MCP servers announce. */
export const SERVICE = "_mcp._tcp.local";

/**
 * Distinct instances kept from one listing: the gateway holds at most 1,000 candidates
 * (MAX_CANDIDATES in core/sync/discovery_service.ts), so more would only be parsed to be refused.
 */
export const MAX_INSTANCES = 1_000;
/** Records kept from one listing: room for each instance's PTR, SRV, TXT, A and AAAA. */
export const MAX_RECORDS = 5 * MAX_INSTANCES;

/** One DNS record as multicast-dns decodes it. */
export interface MdnsRecord {
  name: string;
  type: string;
  data: unknown;
}

/** The part of a multicast-dns instance this source uses. */
export interface Mdns {
  on(
    event: "response",
    fn: (packet: { answers?: MdnsRecord[]; additionals?: MdnsRecord[] }) => void,
  ): void;
  on(event: "error" | "warning", fn: (error: Error) => void): void;
  on(event: "ready", fn: () => void): void;
  query(q: { questions: { name: string; type: string }[] }): void;
  destroy(cb?: () => void): void;
}

/** How long to listen, and how to open the socket. */
export interface LanOptions {
  /** How long to collect answers after the query (default 2 s). */
  listenMs?: number;
  /** multicast-dns options, e.g. `{ loopback: true, interface: "127.0.0.1" }` for tests. */
  mdns?: Record<string, unknown>;
  /** Times the listening; the real clock by default. */
  clock?: Clock;
  /** Where a listing cut at the caps is reported. */
  logger?: Logger;
  /** Opens the socket; multicast-dns by default (tests hand in a fake). */
  open?: (options?: Record<string, unknown>) => Mdns;
}

/** A discovery source over mDNS. */
export class LanSource implements DiscoverySource {
  #options: LanOptions;

  constructor(options: LanOptions = {}) {
    this.#options = options;
  }

  /** Asks once and returns every server that answered within `listenMs` (or until `signal`). */
  async list(signal?: AbortSignal): Promise<DiscoveryCandidate[]> {
    const mdns = (this.#options.open ?? await loadMulticastDns())(this.#options.mdns);
    const heard = new HeardRecords();
    return new Promise((resolve, reject) => {
      let timer: TimerHandle | undefined;
      let finished = false;
      const finish = (error?: Error) => {
        if (finished) return;
        finished = true;
        timer?.cancel();
        signal?.removeEventListener("abort", stop);
        if (heard.full) this.#reportCut(heard);
        mdns.destroy(() => error ? reject(error) : resolve(heard.candidates()));
      };
      // Given up on (a timeout, a stop): the socket is closed at once, not at the end of listenMs.
      const stop = () => finish(new Error("discovery-lan: the mDNS query was cancelled"));
      if (signal?.aborted) return stop();
      signal?.addEventListener("abort", stop, { once: true });
      mdns.on("error", (error) =>
        finish(
          new Error(
            `discovery-lan: mDNS failed (${error.message}); multicast on UDP 5353 must be allowed`,
          ),
        ));
      mdns.on("response", (packet) => {
        // Packets already queued on the socket can still arrive between finish and the close.
        if (finished) return;
        heard.add(packet.answers ?? []).add(packet.additionals ?? []);
        // Nothing more could be kept, so answer with what was heard instead of parsing a flood
        // for the rest of the window.
        if (heard.full) finish();
      });
      mdns.on("ready", () => {
        // A socket that binds after the listing was given up on opens no window: its timer
        // would outlive the listing (seen as a leaked timer under load).
        if (finished) return;
        // The window opens before the query, so an answer that ends the listing finds a timer to cancel.
        const clock = this.#options.clock ?? systemClock;
        timer = clock.setTimeout(() => finish(), this.#options.listenMs ?? 2_000);
        mdns.query({ questions: [{ name: SERVICE, type: "PTR" }] });
      });
    });
  }

  #reportCut(heard: HeardRecords): void {
    this.#options.logger?.warn(
      `discovery-lan: mDNS answers reached the cap of ${MAX_INSTANCES} instances ` +
        `(${MAX_RECORDS} records); stopped listening early and dropped ${heard.dropped} ` +
        "records past it. Something on the network announces more servers than can be proposed",
      { dropped: heard.dropped, maxInstances: MAX_INSTANCES, maxRecords: MAX_RECORDS },
    );
  }
}

/** multicast-dns, loaded on first use: a gateway that never discovers does not carry the mDNS stack. */
async function loadMulticastDns(): Promise<(options?: Record<string, unknown>) => Mdns> {
  const { default: multicastDns } = await import("multicast-dns");
  return multicastDns as unknown as (options?: Record<string, unknown>) => Mdns;
}

/**
 * The records of one listing, bounded and indexed as they arrive. Answers come from anyone on the
 * LAN and are parsed in the gateway's own event loop, so what is kept stops at MAX_INSTANCES and
 * MAX_RECORDS, and each lookup is one Map read: a flood costs time in proportion to its size.
 * The first record of a name and type wins, as it did when they were searched in order.
 */
export class HeardRecords {
  /** Instance names in the order their PTR was first heard. */
  #instances = new Set<string>();
  /** The first record's data per type, then per name. */
  #byType = new Map<string, Map<string, unknown>>(
    ["SRV", "TXT", "A", "AAAA"].map((type) => [type, new Map()]),
  );
  #kept = 0;
  #dropped = 0;

  /** Keeps what the caps allow of `records`; returns this, to chain. */
  add(records: readonly MdnsRecord[]): this {
    for (const record of records) {
      const type = record.type;
      if (type === "PTR") {
        if (record.name !== SERVICE) continue;
        const instance = String(record.data);
        if (this.#instances.has(instance)) continue;
        if (this.#instances.size >= MAX_INSTANCES || this.#kept >= MAX_RECORDS) {
          this.#dropped++;
          continue;
        }
        this.#instances.add(instance);
      } else {
        const names = this.#byType.get(type);
        if (!names) continue;
        const name = record.name;
        if (names.has(name)) continue;
        if (this.#kept >= MAX_RECORDS) {
          this.#dropped++;
          continue;
        }
        names.set(name, record.data);
      }
      this.#kept++;
    }
    return this;
  }

  /** Whether a cap was reached, so nothing more heard could become a candidate. */
  get full(): boolean {
    return this.#instances.size >= MAX_INSTANCES || this.#kept >= MAX_RECORDS;
  }

  /** How many records were refused because a cap was reached. */
  get dropped(): number {
    return this.#dropped;
  }

  /** How many records are kept (at most MAX_RECORDS). */
  get kept(): number {
    return this.#kept;
  }

  /** Candidates from what was kept: PTR → instance, SRV → host:port, TXT → path, A → address. */
  candidates(): DiscoveryCandidate[] {
    const srvs = this.#byType.get("SRV")!, txts = this.#byType.get("TXT")!;
    const as = this.#byType.get("A")!, aaaas = this.#byType.get("AAAA")!;
    const candidates: DiscoveryCandidate[] = [];
    for (const instance of this.#instances) {
      const srv = srvs.get(instance) as { port?: number; target?: string } | undefined;
      if (!srv?.port || !srv.target) continue;
      const txt = parseTxt(txts.get(instance));
      const address = as.get(srv.target) ?? aaaas.get(srv.target);
      const host = typeof address === "string" ? address : srv.target;
      const path = txt.path?.startsWith("/") ? txt.path : `/${txt.path ?? "mcp"}`;
      candidates.push({
        id: instance.slice(0, -(SERVICE.length + 1)) || instance,
        source: "lan",
        transport: txt.transport === "sse" ? "sse" : "http",
        url: `http://${host.includes(":") ? `[${host}]` : host}:${srv.port}${path}`,
        labels: { host: srv.target },
      });
    }
    return candidates.sort((a, b) => a.id.localeCompare(b.id));
  }
}

/** Candidates from `records` as a listing would keep them (bounded by MAX_INSTANCES and MAX_RECORDS). */
export function candidatesFromRecords(records: readonly MdnsRecord[]): DiscoveryCandidate[] {
  return new HeardRecords().add(records).candidates();
}

/** TXT data as multicast-dns gives it (a list of buffers or strings) → key/value pairs. */
function parseTxt(data: unknown): Record<string, string> {
  const items = Array.isArray(data) ? data : data === undefined ? [] : [data];
  const pairs: Record<string, string> = {};
  for (const item of items) {
    const text = typeof item === "string" ? item : new TextDecoder().decode(item as Uint8Array);
    const at = text.indexOf("=");
    if (at > 0) pairs[text.slice(0, at).toLowerCase()] = text.slice(at + 1);
  }
  return pairs;
}
