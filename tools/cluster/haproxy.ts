/**
 * HAProxy in front of the gateway replicas: HTTP mode, round-robin on every request, no
 * stickiness, a health check on `/readyz`, and timeouts long enough for SSE GET streams. The
 * config is written to a temp dir; {@link haproxyConfig} is also the example docs/scale-out.md shows.
 * @module
 */
import { canConnect, HOST, type ManagedProcess, spawnProcess, waitUntil } from "./process.ts";

/** Where `haproxy` is looked for: Debian's path (often not on a user's PATH), then PATH. */
export function haproxyCommands(): string[] {
  return ["/usr/sbin/haproxy", "haproxy"];
}

const START_TIMEOUT_MS = 15_000;

/** One backend server: a replica's id and `host:port`. */
export interface Backend {
  id: string;
  address: string;
}

/**
 * The HAProxy config: every request balanced on its own (no cookie, no `prefer-last-server`),
 * a replica out of rotation after two failed checks 500 ms apart, and a request that never ran
 * (refused connection, or a gateway's 503) retried on another replica.
 */
export function haproxyConfig(bind: string, backends: readonly Backend[]): string {
  return [
    "global",
    "  maxconn 4096",
    "",
    "defaults",
    "  mode http",
    "  option httplog",
    "  timeout connect 2s",
    // A GET stream can stay quiet for long; the gateway ends idle sessions itself.
    "  timeout client 1h",
    "  timeout server 1h",
    "  timeout tunnel 1h",
    "  timeout http-keep-alive 30s",
    // A refused connection and a gateway's 503 (draining, or its shared state unreachable) never
    // ran the request: both are safe to send to another replica. Nothing else is retried.
    "  retries 2",
    "  retry-on conn-failure 503",
    "  option redispatch 1",
    "",
    "frontend mcp",
    `  bind ${bind}`,
    "  default_backend replicas",
    "",
    "backend replicas",
    "  balance roundrobin",
    // /readyz, not /healthz: a draining or still-starting replica leaves the rotation.
    "  option httpchk GET /readyz",
    "  http-check expect status 200",
    "  default-server inter 500ms fall 2 rise 1",
    ...backends.map((b) => `  server ${b.id} ${b.address} check`),
    "",
  ].join("\n");
}

/** A running HAProxy. */
export interface HaproxyHandle {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  process: ManagedProcess;
  stop(): Promise<void>;
}

/**
 * Writes the config into `dir` and starts HAProxy in the foreground on `port` (the replicas must
 * accept `127.0.0.1:<port>` as a Host: MCP_ALLOWED_HOSTS); waits until it accepts connections.
 */
export async function startHaproxy(
  dir: string,
  port: number,
  backends: readonly Backend[],
): Promise<HaproxyHandle> {
  const path = `${dir}/haproxy.cfg`;
  await Deno.writeTextFile(path, haproxyConfig(`${HOST}:${port}`, backends));
  const process = spawnProcess({
    name: "haproxy",
    commands: haproxyCommands(),
    install: "apt-get install -y haproxy",
    // -db: stay in the foreground, so stopping the child stops HAProxy.
    args: ["-db", "-f", path],
  });
  try {
    await waitUntil(
      `haproxy on ${HOST}:${port}`,
      () => canConnect(port),
      START_TIMEOUT_MS,
      process,
    );
  } catch (error) {
    await process.stop();
    throw error;
  }
  return {
    url: `http://${HOST}:${port}`,
    process,
    async stop() {
      await process.stop();
    },
  };
}
