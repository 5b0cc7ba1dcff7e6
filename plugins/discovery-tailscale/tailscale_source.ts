/**
 * Finds MCP servers on a tailnet: online peers carrying one of the configured tags (default
 * `tag:mcp`), each at the configured ports and path. Peers come from `tailscale status --json`,
 * or from tailscaled's LocalAPI over its unix socket when one is configured.
 * @module
 */
import type { DiscoveryCandidate, DiscoverySource } from "../../core/plugin_api/mod.ts";

/** What to look for and how to ask. */
export interface TailscaleOptions {
  /** The CLI to run (default `tailscale`). */
  cli?: string;
  /** tailscaled's LocalAPI socket, e.g. `/var/run/tailscale/tailscaled.sock`; preferred over the CLI. */
  socket?: string;
  /** Ports MCP servers listen on (default [8787]). */
  ports?: number[];
  /** Peer tags to accept (default ["tag:mcp"]); `*` accepts every peer. */
  tags?: string[];
  /** Path of the MCP endpoint (default `/mcp`). */
  path?: string;
  transport?: "http" | "sse";
}

/** The parts of one peer this source reads. */
interface Peer {
  HostName?: string;
  DNSName?: string;
  TailscaleIPs?: string[];
  Tags?: string[];
  Online?: boolean;
  OS?: string;
}

/** A discovery source over the local tailscaled. */
export class TailscaleSource implements DiscoverySource {
  #options: TailscaleOptions;

  constructor(options: TailscaleOptions = {}) {
    this.#options = options;
  }

  /** Candidates from the current peer list. */
  async list(): Promise<DiscoveryCandidate[]> {
    return candidatesFromStatus(await this.#status(), this.#options);
  }

  async #status(): Promise<unknown> {
    if (this.#options.socket) return await localApiStatus(this.#options.socket);
    const cli = this.#options.cli ?? "tailscale";
    let output: Deno.CommandOutput;
    try {
      output = await new Deno.Command(cli, { args: ["status", "--json"], stdin: "null" }).output();
    } catch (error) {
      throw new Error(
        `discovery-tailscale: cannot run "${cli} status --json": ${(error as Error).message}; ` +
          "install Tailscale or set MCP_PLUGIN_DISCOVERY_TAILSCALE_CLI (or _SOCKET)",
      );
    }
    const text = new TextDecoder().decode(output.stdout);
    if (!output.success) {
      throw new Error(
        `discovery-tailscale: "${cli} status --json" exited with ${output.code}: ${
          new TextDecoder().decode(output.stderr).trim().slice(0, 200)
        }; is tailscaled running and logged in?`,
      );
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new Error(`discovery-tailscale: "${cli} status --json" did not print JSON`);
    }
  }
}

/** Candidates from a `tailscale status --json` document. */
export function candidatesFromStatus(
  status: unknown,
  options: TailscaleOptions = {},
): DiscoveryCandidate[] {
  const peers = Object.values(
    (status as { Peer?: Record<string, Peer> } | null)?.Peer ?? {},
  );
  const tags = options.tags ?? ["tag:mcp"];
  const ports = options.ports ?? [8787];
  const path = options.path ?? "/mcp";
  const candidates: DiscoveryCandidate[] = [];
  for (const peer of peers) {
    if (!peer.Online) continue;
    if (!tags.includes("*") && !(peer.Tags ?? []).some((t) => tags.includes(t))) continue;
    // MagicDNS names survive IP changes; the first IP is the fallback without MagicDNS.
    const host = peer.DNSName?.replace(/\.$/, "") || peer.TailscaleIPs?.[0];
    if (!host) continue;
    const name = peer.HostName ?? host;
    for (const port of ports) {
      candidates.push({
        id: `${name}:${port}`,
        source: "tailscale",
        transport: options.transport ?? "http",
        url: `http://${host.includes(":") ? `[${host}]` : host}:${port}${path}`,
        labels: {
          host: name,
          ...(peer.OS ? { os: peer.OS } : {}),
          ...(peer.Tags?.length ? { tags: peer.Tags.join(",") } : {}),
        },
      });
    }
  }
  return candidates.sort((a, b) => a.id.localeCompare(b.id));
}

/** `GET /localapi/v0/status` over tailscaled's unix socket (HTTP/1.0: the answer ends at EOF). */
async function localApiStatus(socket: string): Promise<unknown> {
  const conn = await Deno.connect({ transport: "unix", path: socket });
  try {
    await conn.write(new TextEncoder().encode(
      "GET /localapi/v0/status HTTP/1.0\r\nHost: local-tailscaled.sock\r\n\r\n",
    ));
    const text = await new Response(conn.readable).text();
    const split = text.indexOf("\r\n\r\n");
    const statusLine = text.slice(0, text.indexOf("\r\n"));
    if (!/^HTTP\/1\.[01] 200/.test(statusLine)) {
      throw new Error(`discovery-tailscale: LocalAPI ${socket} answered "${statusLine}"`);
    }
    return JSON.parse(text.slice(split + 4));
  } finally {
    try {
      conn.close();
    } catch {
      // Already closed by reading to the end.
    }
  }
}
