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
  systemClock,
  type TimerHandle,
} from "../../core/plugin_api/mod.ts";

/** The DNS-SD service type MCP servers announce. */
export const SERVICE = "_mcp._tcp.local";

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
}

/** A discovery source over mDNS. */
export class LanSource implements DiscoverySource {
  #options: LanOptions;

  constructor(options: LanOptions = {}) {
    this.#options = options;
  }

  /** Asks once and returns every server that answered within `listenMs` (or until `signal`). */
  async list(signal?: AbortSignal): Promise<DiscoveryCandidate[]> {
    // Loaded on first use: a gateway that never discovers does not carry the mDNS stack.
    const { default: multicastDns } = await import("multicast-dns");
    const mdns = (multicastDns as unknown as (o?: Record<string, unknown>) => Mdns)(
      this.#options.mdns,
    );
    const records: MdnsRecord[] = [];
    return new Promise((resolve, reject) => {
      let timer: TimerHandle | undefined;
      let finished = false;
      const finish = (error?: Error) => {
        if (finished) return;
        finished = true;
        timer?.cancel();
        signal?.removeEventListener("abort", stop);
        mdns.destroy(() => error ? reject(error) : resolve(candidatesFromRecords(records)));
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
        records.push(...(packet.answers ?? []), ...(packet.additionals ?? []));
      });
      mdns.on("ready", () => {
        mdns.query({ questions: [{ name: SERVICE, type: "PTR" }] });
        const clock = this.#options.clock ?? systemClock;
        timer = clock.setTimeout(() => finish(), this.#options.listenMs ?? 2_000);
      });
    });
  }
}

/** Candidates from every record heard: PTR → instance, SRV → host:port, TXT → path, A → address. */
export function candidatesFromRecords(records: readonly MdnsRecord[]): DiscoveryCandidate[] {
  const instances = new Set(
    records.filter((r) => r.type === "PTR" && r.name === SERVICE).map((r) => String(r.data)),
  );
  const candidates: DiscoveryCandidate[] = [];
  for (const instance of instances) {
    const srv = records.find((r) => r.type === "SRV" && r.name === instance)?.data as
      | { port?: number; target?: string }
      | undefined;
    if (!srv?.port || !srv.target) continue;
    const txt = parseTxt(records.find((r) => r.type === "TXT" && r.name === instance)?.data);
    const address = records.find((r) => r.type === "A" && r.name === srv.target)?.data ??
      records.find((r) => r.type === "AAAA" && r.name === srv.target)?.data;
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
