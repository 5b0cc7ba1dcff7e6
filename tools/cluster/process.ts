/**
 * A child process the local cluster owns (nats-server, a gateway replica, HAProxy): spawned with
 * its stderr always drained into a bounded tail, stopped with SIGTERM then SIGKILL, and waited
 * for, so nothing is left running and every failure can show what the process said.
 * @module
 */

import { deadline, pause, settlesWithin, systemClock } from "../../core/support/clock.ts";

/** Loopback: every process of the local cluster listens here only. */
export const HOST = "127.0.0.1";

const STDERR_TAIL_CHARS = 4_000;
const STOP_GRACE_MS = 5_000;
const POLL_MS = 25;

/** A spawned process with its stderr tail. */
export interface ManagedProcess {
  /** What it is, for error messages ("nats-server n2", "replica r1"). */
  readonly name: string;
  readonly pid: number;
  /** Resolves when it has exited and its stderr is drained. */
  readonly done: Promise<Deno.CommandStatus>;
  exited(): boolean;
  /** The last few thousand characters it wrote to stderr. */
  stderrTail(): string;
  /** Sends `signal` (SIGKILL by default) and waits for the exit. */
  kill(signal?: Deno.Signal): Promise<Deno.CommandStatus>;
  /** SIGTERM, SIGKILL after a grace period, then waits; idempotent. */
  stop(graceMs?: number): Promise<Deno.CommandStatus>;
}

/** How to run one process. */
export interface SpawnOptions {
  name: string;
  /** Binaries to try in order (an absolute path, then a bare name looked up on PATH). */
  commands: readonly string[];
  args: readonly string[];
  env?: Record<string, string>;
  cwd?: string;
  /** Called with every stderr chunk (e.g. to notice "listening on"). */
  onStderr?: (text: string) => void;
  /** The command that installs the binary, for the error when none of `commands` exists. */
  install?: string;
}

/** Spawns the first of `commands` that exists; throws naming the binary when none does. */
export function spawnProcess(options: SpawnOptions): ManagedProcess {
  let child: Deno.ChildProcess | undefined;
  for (const command of options.commands) {
    try {
      child = new Deno.Command(command, {
        args: [...options.args],
        ...(options.cwd ? { cwd: options.cwd } : {}),
        env: { NO_COLOR: "1", ...options.env },
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn();
      break;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
  }
  if (!child) {
    throw new Error(`${options.name}: none of ${options.commands.join(", ")} is installed`);
  }
  const spawned = child;
  let tail = "";
  let exited = false;
  const pump = (async () => {
    try {
      for await (const text of spawned.stderr.pipeThrough(new TextDecoderStream())) {
        tail = (tail + text).slice(-STDERR_TAIL_CHARS);
        options.onStderr?.(text);
      }
    } catch {
      // Only if the process vanished mid-read; the tail is best-effort diagnostics.
    }
  })();
  const done = spawned.status.then(async (status) => {
    exited = true;
    await pump;
    return status;
  });
  const send = (signal: Deno.Signal) => {
    if (exited) return;
    try {
      spawned.kill(signal);
    } catch {
      // It exited between the check and the signal.
    }
  };
  let stopping: Promise<Deno.CommandStatus> | undefined;
  return {
    name: options.name,
    pid: spawned.pid,
    done,
    exited: () => exited,
    stderrTail: () => tail,
    kill(signal = "SIGKILL") {
      send(signal);
      return done;
    },
    stop(graceMs = STOP_GRACE_MS) {
      stopping ??= (async () => {
        send("SIGTERM");
        if (!(await settlesWithin(systemClock, graceMs, done))) send("SIGKILL");
        return await done;
      })();
      return stopping;
    },
  };
}

/** Asks the kernel for a free loopback port: bind port 0, read it, close. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: HOST, port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/** Whether something accepts TCP connections on the loopback port. */
export async function canConnect(port: number): Promise<boolean> {
  try {
    const conn = await Deno.connect({ hostname: HOST, port });
    conn.close();
    return true;
  } catch {
    return false;
  }
}

/** Resolves after `ms` (the local cluster runs real processes, so it polls in real time). */
export function delay(ms: number): Promise<void> {
  return pause(systemClock, ms);
}

/**
 * Polls `check` until it is true; throws naming `what` (and, if it exited or never came up,
 * the process's stderr tail) after `timeoutMs`.
 */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  process?: ManagedProcess,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (process?.exited()) break;
    try {
      if (await check()) return;
    } catch {
      // Not up yet (connection refused, half-written answer): poll again.
    }
    await delay(POLL_MS);
  }
  const why = process?.exited() ? "its process exited" : `not within ${timeoutMs} ms`;
  const tail = process ? `; ${process.name} stderr:\n${process.stderrTail() || "(empty)"}` : "";
  throw new Error(`${what} did not come up (${why})${tail}`);
}

/** GETs a loopback URL and parses its JSON body (undefined if it does not answer 2xx JSON). */
export async function getJson(url: string, timeoutMs = 2_000): Promise<unknown> {
  const limit = deadline(systemClock, timeoutMs);
  try {
    const response = await fetch(url, { signal: limit.signal });
    if (!response.ok) {
      await response.body?.cancel();
      return undefined;
    }
    return await response.json();
  } finally {
    limit.cancel();
  }
}
