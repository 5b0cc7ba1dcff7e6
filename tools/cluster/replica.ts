/**
 * One gateway replica as a real child process: `deno run -A main.ts serve --transport http` on a
 * port chosen once, so a replica that is killed and started again comes back at the same address
 * (the load balancer's config names it). Ready when `/readyz` answers 200.
 * @module
 */
import {
  freePort,
  getJson,
  HOST,
  type ManagedProcess,
  spawnProcess,
  waitUntil,
} from "./process.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
/** A replica loads its fleet before it is ready; on a loaded 2-core machine that takes a while. */
const READY_TIMEOUT_MS = 90_000;

/** A gateway replica that can be killed and started again. */
export interface Replica {
  /** MCP_REPLICA_ID. */
  readonly id: string;
  /** `http://127.0.0.1:<port>`: the replica itself, bypassing the load balancer. */
  readonly url: string;
  readonly port: number;
  running(): boolean;
  /** The process id while it runs. */
  pid(): number | undefined;
  /** Starts the process and waits until `/readyz` answers 200. */
  start(): Promise<void>;
  /** Sends `signal` (default SIGKILL) and waits for the exit. */
  kill(signal?: Deno.Signal): Promise<void>;
  /** SIGTERM (a graceful drain), SIGKILL after the grace period; waits. */
  stop(): Promise<void>;
  /** Its stderr tail (the gateway's log). */
  log(): string;
}

/** Creates (without starting) replica `id` with `env` on a free port. */
export function createReplica(id: string, env: Record<string, string>): Replica {
  let port = freePort();
  let process: ManagedProcess | undefined;
  let last: ManagedProcess | undefined;
  let served = false;
  const launch = async () => {
    const url = `http://${HOST}:${port}`;
    process = last = spawnProcess({
      name: `replica ${id}`,
      commands: [Deno.execPath()],
      args: ["run", "-A", `${ROOT}main.ts`, "serve", "--transport", "http", "--port", String(port)],
      cwd: ROOT,
      env: { ...env, MCP_REPLICA_ID: id, MCP_SERVER_HOST: HOST },
    });
    await waitUntil(
      `replica ${id} at ${url}/readyz`,
      async () => ((await getJson(`${url}/readyz`)) as { status?: string })?.status === "ready",
      READY_TIMEOUT_MS,
      process,
    );
  };
  const replica: Replica = {
    id,
    get url() {
      return `http://${HOST}:${port}`;
    },
    get port() {
      return port;
    },
    running: () => process !== undefined && !process.exited(),
    pid: () => replica.running() ? process?.pid : undefined,
    log: () => (process ?? last)?.stderrTail() ?? "",
    async start() {
      if (replica.running()) return;
      // Before its first start nothing knows its port yet: one found free but taken before the
      // replica bound it is replaced. Afterwards it must come back where the load balancer looks.
      for (let attempt = 1;; attempt++) {
        try {
          await launch();
          served = true;
          return;
        } catch (error) {
          if (served || attempt >= 3 || !/AddrInUse|address already in use/i.test(String(error))) {
            throw error;
          }
          port = freePort();
        }
      }
    },
    async kill(signal = "SIGKILL") {
      const current = process;
      process = undefined;
      await current?.kill(signal);
    },
    async stop() {
      const current = process;
      process = undefined;
      await current?.stop(10_000);
    },
  };
  return replica;
}
