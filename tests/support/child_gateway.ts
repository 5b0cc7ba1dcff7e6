/**
 * Test support: the gateway as a real child process serving stdio, driven by raw frames or the SDK.
 * @module
 */

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

/** Spawns `main.ts serve --transport stdio` with the given variables. */
export function spawnStdioGateway(env: Record<string, string> = {}): ChildGateway {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}main.ts`, "serve", "--transport", "stdio"],
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
