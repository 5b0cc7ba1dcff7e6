/**
 * Bench support: child processes that are always cleaned up, their stderr drained, and their
 * memory read from /proc.
 *
 * Every process spawned here is registered until it has exited, so a failing scenario or Ctrl-C
 * still ends all of them. A gateway's upstreams run in their own process groups (the relay
 * workers spawn them detached), so killing the gateway alone could orphan them: before stopping a
 * gateway its descendants are recorded, and any still alive afterwards are killed by pid (after
 * checking the pid was not reused).
 * @module
 */

/** The repository root (ends with "/"). */
export const ROOT = new URL("../", import.meta.url).pathname;

/** A process identity that survives pid reuse: pid plus start time from /proc/<pid>/stat. */
export interface ProcId {
  pid: number;
  start: string;
}

/** A spawned child with drained stderr. */
export interface Child {
  name: string;
  process: Deno.ChildProcess;
  /** The most recent stderr lines (for error messages). */
  stderrTail(): string;
  /** Resolves with the first stderr match of `pattern`, or rejects after `ms` or on exit. */
  waitForStderr(pattern: RegExp, ms: number): Promise<RegExpMatchArray>;
  /** Whether the process has exited. */
  readonly exited: boolean;
  /** Ends the process and its recorded descendants; bounded; safe to call twice. */
  stop(): Promise<void>;
}

const live = new Set<Child>();

/** Ends every child still registered (used in `finally` and on SIGINT). */
export async function stopAll(): Promise<void> {
  await Promise.allSettled([...live].map((c) => c.stop()));
}

/** The environment children inherit: this one without gateway settings that would skew a run. */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(Deno.env.toObject())) {
    if (key.startsWith("MCP_") || key === "NATS_URL") continue;
    env[key] = value;
  }
  return { NO_COLOR: "1", ...env, ...extra };
}

const TAIL_LINES = 60;

/** Spawns `program args…` with piped stdio (or stdin null), draining stderr continuously. */
export function spawnChild(
  name: string,
  program: string,
  args: string[],
  options: {
    env: Record<string, string>;
    cwd?: string;
    stdin: "piped" | "null";
    stdout: "piped" | "null";
    /** How to ask the process to end before it is killed. */
    gracefully: "close-stdin" | "sigterm";
    graceMs?: number;
  },
): Child {
  const process = new Deno.Command(program, {
    args,
    env: options.env,
    clearEnv: true,
    ...(options.cwd ? { cwd: options.cwd } : {}),
    stdin: options.stdin,
    stdout: options.stdout,
    stderr: "piped",
  }).spawn();
  const tail: string[] = [];
  const waiters: { pattern: RegExp; resolve: (m: RegExpMatchArray) => void }[] = [];
  let exited = false;
  let exitedResolve!: () => void;
  const exitedPromise = new Promise<void>((r) => (exitedResolve = r));
  const status = process.status.finally(() => {
    exited = true;
    live.delete(child);
    exitedResolve();
  });

  const drain = (async () => {
    const reader = process.stderr.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let nl: number;
        while ((nl = buffer.indexOf("\n")) !== -1) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          tail.push(line);
          if (tail.length > TAIL_LINES) tail.shift();
          for (let i = waiters.length - 1; i >= 0; i--) {
            const match = line.match(waiters[i]!.pattern);
            if (match) waiters.splice(i, 1)[0]!.resolve(match);
          }
        }
      }
    } catch { /* the pipe broke as the process died */ }
  })();

  let stopping: Promise<void> | undefined;
  const child: Child = {
    name,
    process,
    get exited() {
      return exited;
    },
    stderrTail: () => tail.join("\n"),
    waitForStderr(pattern, ms) {
      const found = tail.map((l) => l.match(pattern)).find((m) => m);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(
            new Error(
              `${name}: no stderr line matching ${pattern} within ${ms} ms; stderr so far:\n` +
                child.stderrTail(),
            ),
          );
        }, ms);
        const done = (m: RegExpMatchArray) => {
          clearTimeout(timer);
          resolve(m);
        };
        waiters.push({ pattern, resolve: done });
        void exitedPromise.then(() => {
          clearTimeout(timer);
          reject(
            new Error(`${name} exited before printing ${pattern}; stderr:\n${child.stderrTail()}`),
          );
        });
      });
    },
    stop() {
      stopping ??= (async () => {
        const descendants = exited ? [] : await descendantsOf(process.pid);
        const graceMs = options.graceMs ?? 10_000;
        const term = () => {
          try {
            process.kill("SIGTERM");
          } catch { /* already gone */ }
        };
        if (!exited && options.gracefully === "close-stdin") {
          // A client transport may hold (and may already have closed) stdin; then SIGTERM asks.
          try {
            await process.stdin.close();
          } catch { /* held or closed */ }
          if (!(await within(status, 2_000))) term();
        } else if (!exited) {
          term();
        }
        if (!(await within(status, graceMs))) {
          try {
            process.kill("SIGKILL");
          } catch { /* already gone */ }
          await within(status, 5_000);
        }
        for (const proc of descendants) await killIfSame(proc);
        await within(drain, 2_000);
      })();
      return stopping;
    },
  };
  live.add(child);
  return child;
}

/** Whether `promise` settled within `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const settled = await Promise.race([
    promise.then(() => true, () => true),
    new Promise<false>((r) => (timer = setTimeout(() => r(false), ms))),
  ]);
  clearTimeout(timer);
  return settled;
}

/** Rejects with a message naming `what` unless `promise` settles within `ms`. */
export async function bounded<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Rethrows a failure of `promise` prefixed with `what` and the last stderr lines of `child`. */
export async function explained<T>(
  what: string,
  child: Child | undefined,
  promise: Promise<T>,
): Promise<T> {
  try {
    return await promise;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const tail = child && !message.includes("stderr")
      ? `\n--- last stderr lines of ${child.name}${
        child.exited ? " (exited)" : ""
      } ---\n${child.stderrTail()}`
      : "";
    throw new Error(`${what}: ${message}${tail}`, { cause: error });
  }
}

/** `/proc/<pid>/stat` split after the command name: [state, ppid, …]; undefined when gone. */
async function statFields(pid: number): Promise<string[] | undefined> {
  try {
    const text = await Deno.readTextFile(`/proc/${pid}/stat`);
    return text.slice(text.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** Every live descendant of `pid` (children, grandchildren, …) with its start time. */
export async function descendantsOf(pid: number): Promise<ProcId[]> {
  const parents = new Map<number, { ppid: number; start: string }>();
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const fields = await statFields(Number(entry.name));
    // Fields after the name: state(0) ppid(1) … starttime(19).
    if (fields) parents.set(Number(entry.name), { ppid: Number(fields[1]), start: fields[19]! });
  }
  const out: ProcId[] = [];
  const frontier = [pid];
  while (frontier.length) {
    const parent = frontier.pop()!;
    for (const [p, info] of parents) {
      if (info.ppid === parent) {
        out.push({ pid: p, start: info.start });
        frontier.push(p);
      }
    }
  }
  return out;
}

async function killIfSame(proc: ProcId): Promise<void> {
  const fields = await statFields(proc.pid);
  if (!fields || fields[19] !== proc.start || fields[0] === "Z") return;
  try {
    Deno.kill(proc.pid, "SIGKILL");
  } catch { /* gone meanwhile */ }
}

/** VmRSS of a process in KiB, or undefined when it is gone. */
export async function rssKiB(pid: number): Promise<number | undefined> {
  try {
    const status = await Deno.readTextFile(`/proc/${pid}/status`);
    const match = status.match(/^VmRSS:\s+(\d+)\s+kB/m);
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** CPU time `pid` has used (user + system, every thread), in microseconds; undefined when gone. */
export async function cpuMicros(pid: number): Promise<number | undefined> {
  try {
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Clock ticks; Linux reports them at 100 Hz to user space.
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return undefined;
  }
}

/**
 * CPU each live thread of `pid` has run, in nanoseconds (the scheduler's own accounting in
 * /proc/<pid>/task/<tid>/schedstat, so a short round is measured to the microsecond, not to
 * /proc/<pid>/stat's 10 ms tick), with the thread's name (trailing digits as `#`), by thread id;
 * rejects off Linux or when the process is gone.
 */
export async function threadNanos(
  pid: number,
): Promise<Map<string, { name: string; ns: number }>> {
  const threads = new Map<string, { name: string; ns: number }>();
  for await (const task of Deno.readDir(`/proc/${pid}/task`)) {
    try {
      const dir = `/proc/${pid}/task/${task.name}`;
      const ns = Number((await Deno.readTextFile(`${dir}/schedstat`)).split(" ")[0]);
      const name = (await Deno.readTextFile(`${dir}/comm`)).trim().replace(/[0-9]+$/, "#");
      threads.set(task.name, { name, ns });
    } catch {
      // A thread that ended between listing and reading has nothing more to add.
    }
  }
  return threads;
}

/** CPU time `pid`'s live threads have run, in nanoseconds; undefined off Linux or when gone. */
export async function cpuNanos(pid: number): Promise<number | undefined> {
  try {
    let ns = 0;
    for (const thread of (await threadNanos(pid)).values()) ns += thread.ns;
    return ns;
  } catch {
    return undefined;
  }
}

/** Sum of VmRSS over every descendant of `pid`, with how many were counted. */
export async function descendantsRssKiB(pid: number): Promise<{ kib: number; count: number }> {
  let kib = 0;
  let count = 0;
  for (const proc of await descendantsOf(pid)) {
    const rss = await rssKiB(proc.pid);
    if (rss !== undefined) {
      kib += rss;
      count++;
    }
  }
  return { kib, count };
}
