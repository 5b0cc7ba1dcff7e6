/**
 * The fault fixture served over Streamable HTTP as a real child process the test owns, on a port
 * that survives restarts (so the gateway's fleet entry stays valid across a crash).
 * @module
 */
import { fixture } from "../support/fleet.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

/** A running (or crashed, until restarted) HTTP fault fixture. */
export interface HttpFaultServer {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  port: number;
  /** The current process id (a restart changes it). */
  readonly pid: number;
  /** Resolves when the current process has exited. */
  readonly exited: Promise<Deno.CommandStatus>;
  /** Starts it again on the same port; the previous process must have exited. */
  restart(): Promise<void>;
  /** Sends the current process a signal (SIGSTOP freezes it, SIGCONT resumes it). */
  signal(signal: Deno.Signal): void;
  /** Ends it (stdin EOF, SIGKILL after 3 s) and waits; idempotent. */
  stop(): Promise<void>;
}

/** Asks the kernel for a port nobody listens on. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

interface Running {
  child: Deno.ChildProcess;
  status: Promise<Deno.CommandStatus>;
  stderr: Promise<string>;
}

function spawn(port: number, fault: string): Running {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      "--config",
      DENO_JSON,
      "--allow-net=127.0.0.1",
      "--allow-env=FAULT,FAULT_TRANSPORT,PORT",
      "--allow-read",
      fixture("upstreams/fault_server.ts"),
    ],
    env: { FAULT: fault, FAULT_TRANSPORT: "http", PORT: String(port), NO_COLOR: "1" },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  return { child, status: child.status, stderr: new Response(child.stderr).text() };
}

/** Reads the child's stdout up to its `listening on port` line; false when it exited first. */
async function listening(running: Running): Promise<boolean> {
  const reader = running.child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  try {
    while (!/listening on port \d+\n/.test(seen)) {
      const { value, done } = await reader.read();
      if (done) return false;
      seen += value;
    }
    return true;
  } finally {
    await reader.cancel();
  }
}

/**
 * Starts the fixture with `FAULT=<fault>` on `port` (a free one by default) and waits until it
 * listens; with `exit-at-start` it waits for the exit instead.
 */
export async function startHttpFault(
  options: { port?: number; fault?: string } = {},
): Promise<HttpFaultServer> {
  const port = options.port ?? freePort();
  const fault = options.fault ?? "none";
  let running: Running;
  const launch = async () => {
    running = spawn(port, fault);
    if (await listening(running)) return;
    const status = await running.status;
    if (fault === "exit-at-start") return;
    throw new Error(`fault fixture on port ${port} exited with ${status.code}: ${await running
      .stderr}`);
  };
  const end = async (current: Running) => {
    try {
      current.child.kill("SIGCONT"); // a frozen process cannot read its EOF
    } catch { /* already gone */ }
    try {
      await current.child.stdin.close();
    } catch { /* already closed */ }
    const timer = setTimeout(() => {
      try {
        current.child.kill("SIGKILL");
      } catch { /* already gone */ }
    }, 3_000);
    await current.status;
    clearTimeout(timer);
    await current.stderr;
  };
  await launch();
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    port,
    get pid() {
      return running.child.pid;
    },
    get exited() {
      return running.status;
    },
    async restart() {
      await end(running);
      await launch();
    },
    signal(signal) {
      running.child.kill(signal);
    },
    stop: () => end(running),
  };
}
