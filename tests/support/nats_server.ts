/**
 * Test helper: runs a real `nats-server` (with JetStream) on a free loopback port.
 *
 * Tests that need NATS pass {@link NEEDS_NATS} as their options (see needs_binary.ts): ignored
 * with one line saying how to install it when the binary is missing, required when `CI` is set.
 * @module
 */
import { needsBinary } from "./needs_binary.ts";

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

const HOST = "127.0.0.1";
const START_DEADLINE_MS = 10_000;
const STOP_GRACE_MS = 5_000;
const POLL_MS = 20;
const STDERR_TAIL_CHARS = 4_000;
const NOT_INSTALLED = "nats-server is not installed; run: apt-get install -y nats-server";

/** Candidate binaries: an explicit override, Debian's path (often not on a user's PATH), PATH. */
function candidates(): string[] {
  const override = Deno.env.get("NATS_SERVER_BIN");
  return override ? [override] : ["/usr/sbin/nats-server", "nats-server"];
}

/** Options for a test that needs nats-server: `Deno.test(name, NEEDS_NATS, fn)`. */
export const NEEDS_NATS: { ignore: boolean } = needsBinary(
  "nats-server",
  [Deno.env.get("NATS_SERVER_BIN") ?? "/usr/sbin/nats-server", "nats-server"],
  "apt-get install -y nats-server",
);

/** Asks the kernel for a free port: bind port 0, read it, close. */
function freePort(): number {
  const listener = Deno.listen({ hostname: HOST, port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function canConnect(port: number): Promise<boolean> {
  try {
    const conn = await Deno.connect({ hostname: HOST, port });
    conn.close();
    return true;
  } catch {
    return false;
  }
}

/** One nats-server process plus the task draining its stderr. */
interface Running {
  child: Deno.ChildProcess;
  status: Promise<Deno.CommandStatus>;
  exited: boolean;
  stderrDone: Promise<void>;
  stderrTail: () => string;
}

function spawn(port: number, storeDir: string): Running {
  const args = ["-a", HOST, "-p", String(port), "-js", "-sd", storeDir];
  let child: Deno.ChildProcess | undefined;
  for (const bin of candidates()) {
    try {
      child = new Deno.Command(bin, { args, stdin: "null", stdout: "null", stderr: "piped" })
        .spawn();
      break;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
  }
  if (!child) throw new Error(NOT_INSTALLED);

  let tail = "";
  const stderrDone = (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of child.stderr) {
        tail = (tail + decoder.decode(chunk, { stream: true })).slice(-STDERR_TAIL_CHARS);
      }
    } catch {
      // The stream errors only if the process vanished; the tail is best-effort diagnostics.
    }
  })();
  const running: Running = {
    child,
    status: child.status,
    exited: false,
    stderrDone,
    stderrTail: () => tail,
  };
  running.status.then(() => void (running.exited = true));
  return running;
}

async function terminate(running: Running): Promise<void> {
  if (!running.exited) {
    try {
      running.child.kill("SIGTERM");
    } catch {
      // Already gone.
    }
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const graceful = await Promise.race([
    running.status.then(() => true),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), STOP_GRACE_MS))),
  ]);
  clearTimeout(timer);
  if (!graceful) {
    try {
      running.child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  }
  await running.status;
  await running.stderrDone;
}

async function waitUntilUp(running: Running, port: number): Promise<void> {
  const deadline = Date.now() + START_DEADLINE_MS;
  while (Date.now() < deadline) {
    if (running.exited) break;
    if (await canConnect(port)) return;
    await delay(POLL_MS);
  }
  const why = running.exited
    ? "exited early"
    : `not accepting connections after ${START_DEADLINE_MS} ms`;
  await terminate(running);
  throw new Error(`nats-server on port ${port} ${why}; stderr:\n${running.stderrTail()}`);
}

/** Starts nats-server with JetStream on a free port and waits until it accepts TCP connections. */
export async function startNatsServer(): Promise<NatsServerHandle> {
  const port = freePort();
  const storeDir = await Deno.makeTempDir({ prefix: "agent33-nats-" });
  let running: Running | undefined;
  const start = async () => {
    const next = spawn(port, storeDir);
    await waitUntilUp(next, port);
    running = next;
  };
  const halt = async () => {
    const current = running;
    running = undefined;
    if (current) await terminate(current);
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
