/**
 * What every command of `main.ts` shares: where it writes and what it reads (injectable, so tests
 * run a command in process), the exit codes, and flag parsing that answers a bad flag with the
 * command's usage. Each command (`policy`, `scan`, `sync`, `discover`) is a function
 * `(args, io) => exit code` built on these.
 * @module
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { stderrSink } from "../core/support/logger.ts";
import { processEnvironment } from "../core/config/environment.ts";

/** Where a command writes, and the environment it reads. */
export interface CommandIo {
  /** Results: what the command was asked for. */
  out(text: string): void;
  /** Problems and usage. */
  err(line: string): void;
  env: Record<string, string | undefined>;
}

/** The command did what it was asked (for `scan`: no finding at or above --fail-on). */
export const EXIT_OK = 0;
/** The command ran and found a problem (a bad policy, a failed fetch, a finding). */
export const EXIT_FAILED = 1;
/** The command was called wrongly; its usage was printed. */
export const EXIT_USAGE = 2;

/** Prints `message` and the command's usage on `err`; returns EXIT_USAGE. */
export function usageError(io: CommandIo, help: string, message: string): number {
  io.err(`${message}\n\n${help}`);
  return EXIT_USAGE;
}

/**
 * `parseArgs(config)`, or undefined after printing a usage error naming the bad flag (parseArgs'
 * own message) when the arguments do not fit.
 */
export function parseFlags<T extends ParseArgsConfig>(
  io: CommandIo,
  help: string,
  config: T,
): ReturnType<typeof parseArgs<T>> | undefined {
  try {
    return parseArgs(config);
  } catch (error) {
    usageError(io, help, (error as Error).message);
    return undefined;
  }
}

/**
 * The process's streams and environment: results on stdout (nothing speaks MCP there), problems
 * on stderr. With `lines`, each `out` call is one line (a newline is added).
 */
export function processIo(options: { lines?: boolean } = {}): CommandIo {
  const encoder = new TextEncoder();
  const suffix = options.lines ? "\n" : "";
  return {
    out: (text) => writeStdout(encoder.encode(text + suffix)),
    err: stderrSink,
    env: processEnvironment(),
  };
}

/** The exit code of a command whose reader closed its stdout: 128 + SIGPIPE, as shells report. */
export const EXIT_BROKEN_PIPE = 141;

/** Writes all of `bytes` (a pipe takes a large write in parts); a reader gone ends the process. */
function writeStdout(bytes: Uint8Array): void {
  try {
    for (let at = 0; at < bytes.length;) at += Deno.stdout.writeSync(bytes.subarray(at));
  } catch (error) {
    // `main.ts scan … | head` closed the pipe: it wants no more output, and a stack trace would
    // only look like a crash. Unix tools stop here, by SIGPIPE, which Deno ignores.
    if (error instanceof Deno.errors.BrokenPipe) Deno.exit(EXIT_BROKEN_PIPE);
    throw error;
  }
}
