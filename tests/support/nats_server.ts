/**
 * Test helper: runs a real `nats-server` (with JetStream) on a free loopback port.
 *
 * Tests that need NATS pass {@link NEEDS_NATS} as their options (see needs_binary.ts): ignored
 * with one line saying how to install it when the binary is missing, required when `CI` is set.
 * @module
 */
import { needsBinary } from "./needs_binary.ts";
import { natsServerCommands } from "../../tools/cluster/nats_cluster.ts";
import {
  canConnect,
  freePort,
  HOST,
  type ManagedProcess,
  spawnProcess,
  waitUntil,
} from "../../tools/cluster/process.ts";

/** A running nats-server owned by a test. */
export interface NatsServerHandle {
  /** `nats://127.0.0.1:<port>`. */
  url: string;
  /** The TCP port; stays the same across {@link NatsServerHandle.restart}. */
  port: number;
  /** Stops the server (SIGTERM, then awaited) and removes its store dir; idempotent. */
  stop(): Promise<void>;
  /**
   * Stops the process and starts it again on the same port with the same store dir (so
   * JetStream state survives). `whileDown` runs while the server is down: publish into the
   * outage there. After {@link NatsServerHandle.stop}, restart starts over with an empty store
   * dir; call stop() again afterwards.
   */
  restart(whileDown?: () => void | Promise<void>): Promise<void>;
}

const START_DEADLINE_MS = 10_000;

/** Options for a test that needs nats-server: `Deno.test(name, NEEDS_NATS, fn)`. */
export const NEEDS_NATS: { ignore: boolean } = needsBinary(
  "nats-server",
  natsServerCommands(Deno.env.get("NATS_SERVER_BIN")),
  "apt-get install -y nats-server",
);

function spawn(port: number, storeDir: string): ManagedProcess {
  return spawnProcess({
    name: `nats-server on port ${port}`,
    commands: natsServerCommands(Deno.env.get("NATS_SERVER_BIN")),
    install: "apt-get install -y nats-server",
    args: ["-a", HOST, "-p", String(port), "-js", "-sd", storeDir],
  });
}

async function waitUntilUp(running: ManagedProcess, port: number): Promise<void> {
  try {
    await waitUntil(
      `nats-server on port ${port}`,
      () => canConnect(port),
      START_DEADLINE_MS,
      running,
    );
  } catch (error) {
    await running.stop();
    throw error;
  }
}

/** Starts nats-server with JetStream on a free port and waits until it accepts TCP connections. */
export async function startNatsServer(): Promise<NatsServerHandle> {
  const port = freePort();
  const storeDir = await Deno.makeTempDir({ prefix: "agent33-nats-" });
  let running: ManagedProcess | undefined;
  const start = async () => {
    const next = spawn(port, storeDir);
    await waitUntilUp(next, port);
    running = next;
  };
  const halt = async () => {
    const current = running;
    running = undefined;
    if (current) await current.stop();
  };
  try {
    await start();
  } catch (error) {
    await Deno.remove(storeDir, { recursive: true });
    throw error;
  }
  let stopped = false;
  return {
    url: `nats://${HOST}:${port}`,
    port,
    async stop() {
      if (stopped) return;
      stopped = true;
      await halt();
      await Deno.remove(storeDir, { recursive: true });
    },
    async restart(whileDown) {
      await halt();
      if (stopped) {
        // stop() removed the store; start over with an empty one (call stop() again later).
        await Deno.mkdir(storeDir, { recursive: true });
        stopped = false;
      }
      try {
        await whileDown?.();
      } finally {
        await start();
      }
    },
  };
}
