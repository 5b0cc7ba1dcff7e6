/**
 * The port a URL connects to. `URL.port` is empty when the port is its scheme's default, which
 * permissions, host checks and a proxy's permits must spell out.
 * @module
 */

/** `url`'s own port, else its scheme's default: 443 for https and wss, 80 otherwise. */
export function urlPort(url: URL): number {
  if (url.port !== "") return Number(url.port);
  return url.protocol === "https:" || url.protocol === "wss:" ? 443 : 80;
}
