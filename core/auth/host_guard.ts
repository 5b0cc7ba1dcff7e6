/**
 * DNS-rebinding and cross-site protection for the HTTP listener: a browser page on a hostile name
 * that resolves to our address still sends its own Host and Origin, so both are checked. An Origin
 * passes when it is listed in MCP_ALLOWED_ORIGINS, or when its scheme is http(s), its host is an
 * allowed name and its port is the one the request was sent to: a page on another port of the same
 * machine (any local dev server) is another site and is refused.
 * @module
 */

/** Where the gateway listens and which extra names may reach it. */
export interface HostGuardOptions {
  host: string;
  port: number;
  /** MCP_ALLOWED_HOSTS: `name` (bare or with the bound port) or `name:port` (exactly). */
  allowedHosts?: string[];
  /** MCP_ALLOWED_ORIGINS: full origins such as `https://app.example`. */
  allowedOrigins?: string[];
}

/** Whether a request may proceed, and if not, what to tell the client. */
export type HostVerdict = { ok: true } | { ok: false; status: 403 | 421; message: string };

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];
// Wildcard binds are not names a client can send, so they never become allowed Host values.
const WILDCARDS = new Set(["", "0.0.0.0", "[::]"]);

/** Whether a host (no port) is loopback: localhost, 127.0.0.0/8 or ::1. */
export function isLoopbackHost(host: string): boolean {
  const h = normalizeName(host);
  if (h === "localhost" || h === "[::1]") return true;
  const octets = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
  return octets !== null && octets.slice(1).every((o) => Number(o) <= 255);
}

/** Compiles the allowed Host and Origin values once; the returned function checks one request. */
export function createHostGuard(options: HostGuardOptions): (request: Request) => HostVerdict {
  const { port, allowedHosts } = options;
  const bound = normalizeName(options.host);
  const hostValues = new Set<string>();
  const originNames = new Set<string>();
  const allowName = (name: string, onlyPort?: string) => {
    originNames.add(name);
    if (onlyPort) {
      hostValues.add(`${name}:${onlyPort}`);
    } else {
      hostValues.add(name);
      hostValues.add(`${name}:${port}`);
    }
  };

  if (isLoopbackHost(bound) || !allowedHosts) LOOPBACK_NAMES.forEach((n) => allowName(n));
  if (!WILDCARDS.has(bound)) allowName(bound);
  for (const entry of allowedHosts ?? []) {
    const { name, port: entryPort } = splitHostPort(entry);
    allowName(name, entryPort);
  }
  const origins = new Set((options.allowedOrigins ?? []).map(normalizeOrigin));

  const firstExplicit = allowedHosts?.[0];
  const suggestion = !WILDCARDS.has(bound)
    ? `${bound}:${port}`
    : firstExplicit
    ? withPort(firstExplicit, port)
    : `127.0.0.1:${port}`;
  const connectTo = `connect to http://${suggestion}`;
  const deny = (message: string): HostVerdict => ({ ok: false, status: 403, message });

  return (request) => {
    const host = request.headers.get("host")?.trim().toLowerCase();
    if (!host) return deny(`Missing Host header; ${connectTo}`);
    if (!hostValues.has(host)) {
      return deny(
        `Host ${JSON.stringify(host)} is not allowed; ${connectTo} or add it to MCP_ALLOWED_HOSTS`,
      );
    }

    const origin = request.headers.get("origin");
    // Non-browser clients send no Origin, and rebinding needs a browser, so absence is fine.
    if (origin === null) return { ok: true };
    const denyOrigin = () =>
      deny(`Origin ${JSON.stringify(origin)} is not allowed; add it to MCP_ALLOWED_ORIGINS`);
    // "null" comes from sandboxed frames and file:// pages: no one to hold accountable.
    if (origin.trim() === "null") return denyOrigin();
    if (origins.has(normalizeOrigin(origin))) return { ok: true };
    const url = parseUrl(origin);
    if (url && (url.protocol === "http:" || url.protocol === "https:")) {
      // Host omits the port when it is the scheme's default, as an origin does.
      const defaultPort = url.protocol === "https:" ? "443" : "80";
      const originPort = url.port || defaultPort;
      const requestPort = splitHostPort(host).port ?? defaultPort;
      if (originNames.has(url.hostname) && originPort === requestPort) return { ok: true };
    }
    return denyOrigin();
  };
}

/** Lowercases a name and brackets a bare IPv6 address, the form Host headers use. */
function normalizeName(name: string): string {
  const n = name.trim().toLowerCase();
  return n.includes(":") && !n.startsWith("[") ? `[${n}]` : n;
}

function splitHostPort(entry: string): { name: string; port?: string } {
  const e = entry.trim().toLowerCase();
  const m = /^(\[[^\]]*\]|[^:]+):(\d+)$/.exec(e);
  return m?.[1] && m[2] ? { name: m[1], port: m[2] } : { name: normalizeName(e) };
}

function withPort(entry: string, port: number): string {
  const { name, port: entryPort } = splitHostPort(entry);
  return `${name}:${entryPort ?? port}`;
}

function normalizeOrigin(origin: string): string {
  return parseUrl(origin)?.origin ?? origin.trim().toLowerCase();
}

function parseUrl(s: string): URL | undefined {
  try {
    return new URL(s.trim());
  } catch {
    return undefined;
  }
}
