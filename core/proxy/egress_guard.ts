/**
 * The egress guard: a SOCKS5 proxy on 127.0.0.1 through which the relay workers of upstreams a
 * registry chose (fleet entries under the sync marker) reach them. Sync checked the entry's name
 * when it proposed it, but a name can point elsewhere a minute later (DNS rebinding, a TTL of 0),
 * and fetch would resolve it again at every connection. So the worker hands the name to the guard
 * (`socks5h`: it resolves nothing itself), and the guard looks the name up at each connection,
 * refuses it when any of its addresses is inside the gateway's own network (unless
 * `MCP_SYNC_ALLOW_PRIVATE`), and opens the TCP connection to the very address it judged: nothing
 * resolves the name again between the check and the connect. TLS runs through the tunnel end to
 * end, so the worker still verifies the name's certificate.
 * @module
 */
import { type Clock, deadline, systemClock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import {
  insideAnswer,
  isIpLiteral,
  privateIpKind,
  RESOLVE_MS,
  type ResolveHost,
  systemResolveHost,
} from "../support/private_address.ts";

/** What the guard is built with. */
export interface EgressGuardOptions {
  logger: Logger;
  /** Looks names up; the system's resolver by default. */
  resolve?: ResolveHost;
  clock?: Clock;
  /** `MCP_SYNC_ALLOW_PRIVATE=true`: addresses inside the gateway's network pass too (still pinned). */
  allowPrivate?: boolean;
}

/**
 * Where a host may be reached: the addresses judged, or why not (a sentence naming the host), and
 * whether that is because it points inside the gateway's own network.
 */
export type EgressVerdict = { addresses: string[] } | { refused: string; inside: boolean };

/** How long a client may take to say where it wants to go. */
const HANDSHAKE_MS = 10_000;

// SOCKS5 (RFC 1928) reply codes.
const REPLY = { ok: 0, failure: 1, notAllowed: 2, hostUnreachable: 4, refused: 5, command: 7 };

/** The proxy; {@link close} it when the upstreams it serves have stopped. */
export class EgressGuard {
  readonly #options: EgressGuardOptions;
  readonly #listener: Deno.TcpListener;
  readonly #open = new Set<Deno.Conn>();
  readonly #handling = new Set<Promise<void>>();
  /** `host:port` of each upstream the guard serves: it is no open proxy for the host's processes. */
  readonly #permitted = new Set<string>();
  readonly #accepting: Promise<void>;
  #closed = false;

  constructor(options: EgressGuardOptions) {
    this.#options = options;
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.#accepting = this.#accept();
  }

  /** The `host:port` a worker needs `net` permission for to reach the guard. */
  get address(): string {
    return `127.0.0.1:${this.#listener.addr.port}`;
  }

  /** The proxy URL for `Deno.createHttpClient`: `socks5h`, so the name reaches the guard. */
  get proxyUrl(): string {
    return `socks5h://${this.address}`;
  }

  /** Lets connections to `host:port` through (the host as the URL parser writes it). */
  permit(host: string, port: number): void {
    this.#permitted.add(`${bare(host)}:${port}`);
  }

  /** Looks `host` up (an IP literal is itself) and judges every address it has. */
  async check(host: string): Promise<EgressVerdict> {
    const name = bare(host);
    const { allowPrivate } = this.#options;
    if (isIpLiteral(name)) {
      const kind = allowPrivate ? undefined : privateIpKind(name);
      return kind
        ? { refused: `${name}, ${kind}, inside the gateway's own network`, inside: true }
        : { addresses: [name] };
    }
    const { resolve = systemResolveHost, clock = systemClock } = this.#options;
    const limit = deadline(clock, RESOLVE_MS);
    let addresses: string[];
    try {
      addresses = await Promise.race([
        resolve(name, limit.signal).catch(() => [] as string[]),
        limit.expired.then(() => undefined),
      ]) ?? [];
      if (limit.passed) {
        return { refused: `${name} could not be looked up within ${RESOLVE_MS} ms`, inside: false };
      }
    } finally {
      limit.cancel();
    }
    if (addresses.length === 0) return { refused: `${name} does not resolve`, inside: false };
    const inside = allowPrivate ? undefined : insideAnswer(addresses);
    return inside ? { refused: `${name} ${inside}`, inside: true } : { addresses };
  }

  /** Stops accepting and cuts the tunnels still open. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#listener.close();
    for (const conn of this.#open) closeQuietly(conn);
    await this.#accepting;
    await Promise.allSettled([...this.#handling]);
  }

  async #accept(): Promise<void> {
    try {
      for await (const conn of this.#listener) {
        const handling = this.#serve(conn).finally(() => this.#handling.delete(handling));
        this.#handling.add(handling);
      }
    } catch {
      // The listener closed.
    }
  }

  async #serve(client: Deno.Conn): Promise<void> {
    this.#open.add(client);
    let upstream: Deno.Conn | undefined;
    const limit = deadline(this.#options.clock ?? systemClock, HANDSHAKE_MS);
    // A client that never finishes its handshake is cut off.
    void limit.expired.then(() => upstream === undefined && closeQuietly(client));
    try {
      const reader = new ByteReader(client);
      const target = await handshake(reader, client);
      if (typeof target === "number") return await replyAndClose(client, target);
      const connected = await this.#connect(target);
      if (typeof connected === "number") return await replyAndClose(client, connected);
      upstream = connected;
      this.#open.add(connected);
      limit.cancel();
      await client.write(reply(REPLY.ok));
      await tunnel(client, connected, reader.rest());
    } catch {
      // A client or upstream that went away mid-handshake or mid-tunnel: nothing to answer.
    } finally {
      limit.cancel();
      for (const conn of [client, upstream]) {
        if (conn === undefined) continue;
        closeQuietly(conn);
        this.#open.delete(conn);
      }
    }
  }

  /** The connection to a permitted, checked target, or the SOCKS reply code saying why not. */
  async #connect(target: { host: string; port: number }): Promise<Deno.Conn | number> {
    const { logger } = this.#options;
    const where = `${target.host}:${target.port}`;
    if (!this.#permitted.has(where)) {
      logger.warn(`egress guard refused ${where}: no upstream from a registry uses it`);
      return REPLY.notAllowed;
    }
    const verdict = await this.check(target.host);
    if ("refused" in verdict) {
      logger.warn(
        `egress guard refused a connection to a registry's upstream: ${verdict.refused}; ` +
          "set MCP_SYNC_ALLOW_PRIVATE=true to allow it, or delete the entry's marker line",
      );
      return verdict.inside ? REPLY.notAllowed : REPLY.hostUnreachable;
    }
    for (const address of verdict.addresses) {
      try {
        return await Deno.connect({ hostname: address, port: target.port });
      } catch {
        // The next address, as a resolver-driven client would.
      }
    }
    return REPLY.refused;
  }
}

/** The greeting and the CONNECT request: the target, or the reply code refusing it. */
async function handshake(
  reader: ByteReader,
  client: Deno.Conn,
): Promise<{ host: string; port: number } | number> {
  const [version, methods] = await reader.take(2);
  if (version !== 5) return REPLY.failure;
  const offered = await reader.take(methods!);
  if (!offered.includes(0)) {
    // No acceptable method: "no authentication" is the only one the guard speaks.
    await client.write(new Uint8Array([5, 0xff]));
    return REPLY.failure;
  }
  await client.write(new Uint8Array([5, 0]));
  const [v, command, , type] = await reader.take(4);
  if (v !== 5) return REPLY.failure;
  let host: string;
  if (type === 1) {
    host = [...await reader.take(4)].join(".");
  } else if (type === 3) {
    const [length] = await reader.take(1);
    host = new TextDecoder().decode(await reader.take(length!)).toLowerCase().replace(/\.+$/, "");
  } else if (type === 4) {
    const bytes = await reader.take(16);
    const groups = Array.from({ length: 8 }, (_, i) => (bytes[2 * i]! << 8) | bytes[2 * i + 1]!);
    // Written as the URL parser writes it (`::1`), as permit() was given it.
    host = bare(new URL(`http://[${groups.map((g) => g.toString(16)).join(":")}]/`).hostname);
  } else {
    return REPLY.failure;
  }
  const [high, low] = await reader.take(2);
  if (command !== 1) return REPLY.command;
  return { host, port: (high! << 8) | low! };
}

/** A SOCKS5 reply with the bound address left zero (clients here ignore it). */
function reply(code: number): Uint8Array {
  return new Uint8Array([5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
}

async function replyAndClose(client: Deno.Conn, code: number): Promise<void> {
  await client.write(reply(code)).catch(() => {});
}

/** Copies both ways until either side ends; `early` is what the client sent past its request. */
async function tunnel(client: Deno.Conn, upstream: Deno.Conn, early: Uint8Array): Promise<void> {
  if (early.length > 0) await upstream.write(early);
  // A side that ends closes the other's write half (a half-close, as TCP has); the tunnel is done
  // when both have, or when one fails, and the caller's finally closes both connections.
  await Promise.all([
    client.readable.pipeTo(upstream.writable),
    upstream.readable.pipeTo(client.writable),
  ]);
}

/** Reads exact byte counts off a connection, keeping what arrived beyond them. */
class ByteReader {
  readonly #conn: Deno.Conn;
  #buffer = new Uint8Array(0);

  constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  async take(n: number): Promise<Uint8Array> {
    while (this.#buffer.length < n) {
      const chunk = new Uint8Array(512);
      const read = await this.#conn.read(chunk);
      if (read === null) throw new Error("closed mid-handshake");
      const grown = new Uint8Array(this.#buffer.length + read);
      grown.set(this.#buffer);
      grown.set(chunk.subarray(0, read), this.#buffer.length);
      this.#buffer = grown;
    }
    const taken = this.#buffer.slice(0, n);
    this.#buffer = this.#buffer.slice(n);
    return taken;
  }

  /** What arrived after the bytes taken. */
  rest(): Uint8Array {
    return this.#buffer;
  }
}

/** A host without IPv6 brackets, lower-case, without a trailing dot. */
function bare(host: string): string {
  const h = host.toLowerCase().replace(/\.+$/, "");
  return h.startsWith("[") && h.endsWith("]") ? h.slice(1, -1) : h;
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}
