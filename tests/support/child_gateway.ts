/**
 * Test support: the gateway as a real child process serving stdio, driven by raw frames or the SDK.
 * @module
 */

import { eventually } from "./fleet.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** A gateway child process speaking MCP on its stdin/stdout. */
export interface ChildGateway {
  process: Deno.ChildProcess;
  stdin: WritableStream<Uint8Array>;
  stdout: ReadableStream<Uint8Array>;
  /** Everything the child wrote to stderr, once it has exited. */
  stderr: Promise<string>;
  /** What the child has written to stderr so far (its log, while it runs). */
  stderrSoFar(): string;
  /** Closes stdin and waits for exit. */
  close(): Promise<Deno.CommandStatus>;
}

/** Spawns `main.ts serve --transport stdio` with the given variables and further `serve` flags. */
export function spawnStdioGateway(
  env: Record<string, string> = {},
  flags: readonly string[] = [],
): ChildGateway {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}main.ts`, "serve", "--transport", "stdio", ...flags],
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let seen = "";
  const stderr = (async () => {
    for await (const text of child.stderr.pipeThrough(new TextDecoderStream())) seen += text;
    return seen;
  })();
  return {
    process: child,
    stdin: child.stdin,
    stdout: child.stdout,
    stderr,
    stderrSoFar: () => seen,
    async close() {
      try {
        await child.stdin.close();
      } catch { /* already closed */ }
      const status = await child.status;
      await stderr;
      return status;
    },
  };
}

/** Reads newline-delimited JSON frames from a byte stream. */
export class FrameReader {
  #reader: ReadableStreamDefaultReader<string>;
  #buffer = "";

  constructor(stream: ReadableStream<Uint8Array>) {
    this.#reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  }

  /** The next frame, parsed. */
  async next(): Promise<Record<string, unknown>> {
    for (;;) {
      const newline = this.#buffer.indexOf("\n");
      if (newline !== -1) {
        const line = this.#buffer.slice(0, newline);
        this.#buffer = this.#buffer.slice(newline + 1);
        if (line.trim()) return JSON.parse(line);
        continue;
      }
      const { value, done } = await this.#reader.read();
      if (done) throw new Error("stream ended before a frame arrived");
      this.#buffer += value;
    }
  }

  /** Releases the stream. */
  async cancel(): Promise<void> {
    await this.#reader.cancel();
  }
}

/** A gateway child process serving HTTP on a free port. */
export interface HttpChild {
  url: string;
  pid: number;
  status: Promise<Deno.CommandStatus>;
  /** Everything written to stderr so far. */
  log(): string;
  signal(signal: Deno.Signal): void;
  /** Waits for the exit and the end of stderr; kills the child first if it still runs. */
  close(): Promise<Deno.CommandStatus>;
}

/**
 * Spawns `main.ts serve --transport http --port 0` with `env`; resolves once it is ready, or once
 * stderr matches `until` when given.
 */
export async function spawnHttpChild(
  env: Record<string, string>,
  until?: RegExp,
): Promise<HttpChild> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}main.ts`, "serve", "--transport", "http", "--port", "0"],
    cwd: ROOT,
    env: {
      NO_COLOR: "1",
      ...env,
    },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let text = "";
  const listening = Promise.withResolvers<string>();
  const pump = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      const match = until ? until.exec(text) : /listening on (http:\/\/\S+)/.exec(text);
      if (match) listening.resolve(match[1] ?? "");
    }
  })();
  const status = child.status;
  let exited = false;
  void status.then(() => {
    exited = true;
    listening.reject(new Error(`the gateway exited before listening:\n${text}`));
  });
  const handle: HttpChild = {
    url: "",
    pid: child.pid,
    status,
    log: () => text,
    signal: (signal) => child.kill(signal),
    async close() {
      if (!exited) child.kill("SIGKILL");
      const result = await status;
      await pump;
      return result;
    },
  };
  try {
    handle.url = await listening.promise;
    if (until) return handle;
    await eventually(
      async () => (await readyz(handle.url)).status === 200,
      "the gateway to be ready",
      60_000,
    );
  } catch (error) {
    await handle.close();
    throw error;
  }
  return handle;
}

export async function readyz(
  url: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}/readyz`);
  return { status: response.status, body: await response.json() };
}
