/**
 * Whether a URL points into the gateway's own network: loopback, link-local (the cloud metadata
 * address 169.254.169.254 among them), private and unique-local ranges. The host is read through
 * the WHATWG URL parser first, so the odd spellings of an IP literal (`0x7f.1`, `2130706433`,
 * `[::ffff:127.0.0.1]`) are checked as the address they are. A name is judged here only when it
 * is `localhost` or under `.localhost`; what other names resolve to is checked by
 * {@link privateNamesOf} before a sync maps its entries.
 * @module
 */
import { type Clock, deadline, systemClock } from "./clock.ts";

/** IPv4 ranges as [first octets as a 32-bit number, prefix length, what it is]. */
const V4: [number, number, string][] = [
  [0x00000000, 8, "a this-network address (reaches the gateway's own host)"],
  [0x7f000000, 8, "a loopback address"],
  [0x0a000000, 8, "a private address"],
  [0x64400000, 10, "a shared (carrier-grade NAT, Tailscale) address"],
  [0xa9fe0000, 16, "a link-local address (where cloud metadata services answer)"],
  [0xac100000, 12, "a private address"],
  [0xc0a80000, 16, "a private address"],
];

function v4Kind(address: number): string | undefined {
  for (const [base, bits, kind] of V4) {
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    if (((address & mask) >>> 0) === base) return kind;
  }
  return undefined;
}

function parseV4(host: string): number | undefined {
  const parts = host.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) {
    return undefined;
  }
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}

/** The 8 groups of a normalised IPv6 literal (as the URL parser prints it, without brackets). */
export function parseV6(host: string): number[] | undefined {
  const [head = "", tail] = host.split("::");
  const groups = (s: string) => (s === "" ? [] : s.split(":").map((g) => parseInt(g, 16)));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const fill = tail === undefined ? 0 : 8 - left.length - right.length;
  const all = [...left, ...Array(fill).fill(0), ...right];
  return all.length === 8 && all.every((g) => Number.isInteger(g) && g >= 0) ? all : undefined;
}

function v6Kind(g: number[]): string | undefined {
  const zeroUntil = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeroUntil(7) && g[7] === 1) return "a loopback address";
  if (zeroUntil(8)) return "the unspecified address (reaches the gateway's own host)";
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d): the IPv4 address decides.
  if (zeroUntil(5) && (g[5] === 0xffff || g[5] === 0)) {
    return v4Kind(((g[6]! << 16) >>> 0) + g[7]!);
  }
  if ((g[0]! & 0xfe00) === 0xfc00) return "a unique-local address";
  if ((g[0]! & 0xffc0) === 0xfe80) return "a link-local address";
  return undefined;
}

/**
 * What kind of address in the gateway's own network `url` points at ("a loopback address",
 * "a private address", …), with the normalised host; undefined for a public host or a name.
 */
export function privateAddressOf(url: string): { host: string; kind: string } | undefined {
  const host = hostOf(url);
  if (host === undefined) return undefined;
  if (host === "localhost" || host.endsWith(".localhost")) {
    return { host, kind: "a loopback name" };
  }
  if (host.startsWith("[") && host.endsWith("]")) {
    const groups = parseV6(host.slice(1, -1));
    const kind = groups && v6Kind(groups);
    return kind ? { host, kind } : undefined;
  }
  const v4 = parseV4(host);
  const kind = v4 === undefined ? undefined : v4Kind(v4);
  return kind ? { host, kind } : undefined;
}

/** The host of `url` as the URL parser normalises it, lower-case, without a trailing dot. */
export function hostOf(url: string): string | undefined {
  // A trailing dot names the same host (an absolute DNS name).
  return URL.parse(url)?.hostname.toLowerCase().replace(/\.+$/, "");
}

/** What kind of address in the gateway's own network an IP address (v4 or v6 text) is. */
export function privateIpKind(ip: string): string | undefined {
  const host = ip.includes(":") ? `[${ip}]` : ip;
  return privateAddressOf(`http://${host}/`)?.kind;
}

/** Whether `host` (bare, or as the URL parser writes it: `[::1]`, `10.0.0.5`) is an IP address. */
export function isIpLiteral(host: string): boolean {
  if (host.startsWith("[") && host.endsWith("]")) return parseV6(host.slice(1, -1)) !== undefined;
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(host) ||
    (host.includes(":") && parseV6(host) !== undefined);
}

/**
 * Why a name whose lookup gave `addresses` may not be reached (`resolves to 10.0.0.5, a private
 * address, inside the gateway's own network`), or undefined when every address is outside.
 */
export function insideAnswer(addresses: readonly string[]): string | undefined {
  for (const address of addresses) {
    const kind = privateIpKind(address);
    if (kind) return `resolves to ${address}, ${kind}, inside the gateway's own network`;
  }
  return undefined;
}

/** Looks a name up: its IPv4 and IPv6 addresses (none when it does not resolve). */
export type ResolveHost = (host: string, signal: AbortSignal) => Promise<string[]>;

/** The system's resolver (`Deno.resolveDns`), A and AAAA records. */
export const systemResolveHost: ResolveHost = async (host, signal) => {
  const records = await Promise.all(
    (["A", "AAAA"] as const).map((type) =>
      Deno.resolveDns(host, type, { signal }).catch(() => [] as string[])
    ),
  );
  return records.flat();
};

/** How long the names of one sync may take to resolve, in all. */
export const RESOLVE_MS = 3000;
/** Lookups in flight at once: a registry listing thousands of names must not flood the resolver. */
export const RESOLVE_CONCURRENCY = 16;

/**
 * The names among `urls`' hosts that a registry may not point the gateway at, each with why (the
 * address inside the gateway's own network it resolves to, or that its lookup did not finish
 * within {@link RESOLVE_MS}): a registry may not reach the gateway's network through a DNS name
 * either, nor hide one behind a slow answer or a thousand other names. A name that does not
 * resolve is not in the map: nothing can be reached through it now.
 */
export async function privateNamesOf(
  urls: Iterable<string>,
  resolve: ResolveHost = systemResolveHost,
  clock: Clock = systemClock,
): Promise<Map<string, string>> {
  const names = new Set<string>();
  for (const url of urls) {
    const host = hostOf(url);
    // IP literals are judged by privateAddressOf; only names are looked up.
    if (host === undefined || privateAddressOf(url) !== undefined) continue;
    if (isIpLiteral(host)) continue;
    names.add(host);
  }
  const found = new Map<string, string>();
  const waiting = [...names];
  const unchecked = new Set(names);
  if (waiting.length === 0) return found;
  const limit = deadline(clock, RESOLVE_MS);
  const lookUp = async () => {
    for (let host = waiting.shift(); host !== undefined; host = waiting.shift()) {
      const addresses = await resolve(host, limit.signal).catch(() => [] as string[]);
      if (limit.signal.aborted) return;
      unchecked.delete(host);
      const inside = insideAnswer(addresses);
      if (inside) found.set(host, inside);
    }
  };
  try {
    await Promise.race([
      Promise.all(Array.from({ length: RESOLVE_CONCURRENCY }, lookUp)),
      limit.expired,
    ]);
  } finally {
    limit.cancel();
  }
  for (const host of unchecked) {
    found.set(
      host,
      `could not be looked up within ${RESOLVE_MS} ms, so it may point inside the gateway's own network`,
    );
  }
  return found;
}
