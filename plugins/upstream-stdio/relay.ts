/**
 * The stdio relay: spawns one upstream's child process and relays newline-delimited JSON-RPC
 * between a message port and the child's stdin/stdout. It runs in the relay worker (the default,
 * confined to `run` of its one command) or, with `isolation: inline`, in the kernel's own thread.
 *
 * Deliberately lean (no SDK import, ~8 MB instead of ~30 MB per worker): it only frames lines and
 * checks they are UTF-8; the kernel parses JSON and validates JSON-RPC. It reads the child only
 * while the kernel has taken enough of what it posted (core/plugin_api/relay_credit.ts), so a
 * child flooding its stdout or stderr blocks on its own pipe instead of filling the gateway.
 * @module
 */
import type { KernelToWorker, WorkerStartSpec, WorkerToKernel } from "../../core/plugin_api/mod.ts";
import { type Clock, settlesWithin, systemClock } from "../../core/plugin_api/clock.ts";
import { RelayCredit } from "../../core/plugin_api/relay_credit.ts";
import { ChunkReader, LineWriter } from "../../core/plugin_api/stdio_framing.ts";
import { LineFramer } from "./line_framer.ts";
import { StderrDigest } from "./stderr_digest.ts";

/** Longest stderr line forwarded, in characters. */
const STDERR_LINE_CHARS = 2000;
/** Longest preview of a malformed frame, in characters. */
const PREVIEW_CHARS = 200;
/** How long to wait for output still in the pipe once the child has exited. */
const DRAIN_AFTER_EXIT_MS = 500;

const strict = new TextDecoder("utf-8", { fatal: true });
const lenient = new TextDecoder();

/** Creates one relay; `post` carries its reports to the kernel, the result takes the kernel's messages; its waits run on `clock`. */
export function createStdioRelay(
  postToKernel: (message: WorkerToKernel) => void,
  clock: Clock = systemClock,
): (message: KernelToWorker | null) => void {
  // Every post spends credit; the pumps read on only while some is left (relay_credit.ts).
  const credit = new RelayCredit();
  const post = (message: WorkerToKernel): void => {
    credit.spend(message);
    postToKernel(message);
  };
  let child: Deno.ChildProcess | undefined;
  let stdin: WritableStreamDefaultWriter<Uint8Array> | undefined;
  let lines: LineWriter | undefined;
  let stopping = false;
  let exited: Promise<Deno.CommandStatus> | undefined;

  function start(spec: WorkerStartSpec): void {
    if (child) return;
    const [program, ...args] = spec.command ?? [];
    if (!program) {
      post({ type: "closed", reason: `upstream "${spec.serverId}" has no command to spawn` });
      return;
    }
    try {
      child = new Deno.Command(program, {
        args,
        env: spec.env ?? {},
        clearEnv: true,
        ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
        // Its own process group, so the kernel can end grandchildren (npx → node → server) too.
        detached: true,
      }).spawn();
    } catch (error) {
      post({ type: "closed", reason: spawnFailure(program, error) });
      return;
    }
    stdin = child.stdin.getWriter();
    lines = new LineWriter(stdin);
    post({ type: "started", pid: child.pid });
    const stdout = pump(
      child.stdout,
      new LineFramer(spec.maxMessageBytes, {
        line: frame,
        oversized: (preview, total, tail) => {
          const head = lenient.decode(preview);
          const id = responseId(head, lenient.decode(tail));
          malformed({
            type: "malformed",
            reason: `frame of ${total} bytes exceeds the limit of ${spec.maxMessageBytes} bytes`,
            preview: head.slice(0, PREVIEW_CHARS),
            ...(id === undefined ? {} : { id }),
          });
        },
      }, PREVIEW_CHARS),
    );
    // Escapes removed and errors folded to their first line, so the log and lastError say what
    // went wrong.
    const digest = new StderrDigest(
      (line) => post({ type: "stderr", line }),
      STDERR_LINE_CHARS,
      clock,
    );
    const stderr = pump(
      child.stderr,
      new LineFramer(STDERR_LINE_CHARS, {
        line: (bytes) => digest.push(lenient.decode(bytes)),
        oversized: (preview, total) =>
          digest.push(
            `${
              lenient.decode(preview).slice(0, STDERR_LINE_CHARS - 40)
            } … (${total} bytes, truncated)`,
          ),
      }, STDERR_LINE_CHARS - 40),
    );
    exited = child.status;
    void exited.then(async (status) => {
      // Output written just before exit must reach the kernel before `closed`.
      await settlesWithin(clock, DRAIN_AFTER_EXIT_MS, Promise.all([stdout.done, stderr.done]));
      // A grandchild may still hold the pipes open; stop reading so the worker can end (a pump
      // waiting for credit a terminated kernel side will never return included).
      credit.close();
      await Promise.all([stdout.cancel(), stderr.cancel()]);
      digest.end();
      // The stdin pipe too: a worker's end frees it, a relay in the kernel's thread must.
      await stdin?.abort().catch(() => {});
      post({
        type: "closed",
        reason: stopping ? "stopped" : `process exited with ${describe(status)}`,
        code: status.code,
        signal: status.signal,
      });
    });
  }

  function frame(bytes: Uint8Array): void {
    let text: string;
    try {
      text = strict.decode(bytes).trim();
    } catch {
      malformed({ type: "malformed", reason: "frame is not valid UTF-8", preview: preview(bytes) });
      return;
    }
    // Sent as text: the kernel parses it (and reports what is not JSON); a string crosses
    // threads several times cheaper than a structured clone of the parsed object.
    if (text !== "") outbox.push(text);
  }

  /** Frames of the chunk being framed; posted together, one thread hop for all of them. */
  let outbox: string[] = [];

  /** Reports a bad stdout frame in its place among the good ones (they may be batched). */
  function malformed(report: Extract<WorkerToKernel, { type: "malformed" }>): void {
    flushOutbox();
    post(report);
  }

  function flushOutbox(): void {
    if (outbox.length === 0) return;
    // Lines never contain a newline (stdio framing), so the kernel splits the batch on it.
    post(outbox.length === 1 ? outbox[0]! : outbox.join("\n"));
    outbox = [];
  }

  /** Relays one serialized JSON-RPC message from the kernel to the child's stdin. */
  function send(line: string): void {
    if (!lines || stopping) return;
    lines.write(line).catch((error) => {
      // The child closing its stdin ends the session; `closed` follows from its exit.
      if (!stopping) {
        post({
          type: "error",
          error: { code: "upstream_error", message: `write to stdin failed: ${String(error)}` },
        });
      }
    });
  }

  async function stop(graceMs: number): Promise<void> {
    if (stopping) return;
    stopping = true;
    if (!child || !exited) {
      post({ type: "closed", reason: "stopped before the process started" });
      return;
    }
    // EOF on stdin is how MCP asks a stdio server to exit; then SIGTERM, then SIGKILL.
    stdin?.close().catch(() => {});
    const gentle = Math.max(1, Math.floor(graceMs * 2 / 3));
    if (await settlesWithin(clock, gentle, exited)) return;
    kill("SIGTERM");
    if (await settlesWithin(clock, Math.max(1, graceMs - gentle), exited)) return;
    kill("SIGKILL");
  }

  function kill(signal: Deno.Signal): void {
    try {
      child?.kill(signal);
    } catch { /* already exited */ }
  }

  /** Reads a byte stream into a framer until it ends or is cancelled. */
  function pump(
    stream: ReadableStream<Uint8Array>,
    framer: LineFramer,
  ): { done: Promise<void>; cancel(): Promise<void> } {
    // One reused buffer (the framer copies what it keeps): no 64 KiB allocation per read.
    const reader = new ChunkReader(stream);
    const done = (async () => {
      try {
        for (;;) {
          // Full window: the child's writes block on its pipe until the kernel catches up.
          const wait = credit.whenOpen();
          if (wait) await wait;
          const value = await reader.read();
          if (value === undefined) break;
          framer.push(value);
          flushOutbox();
        }
        framer.end();
        flushOutbox();
      } catch { /* cancelled, or the pipe broke with the child */ }
    })();
    return {
      done,
      cancel: async () => {
        await reader.cancel().catch(() => {});
        await done;
      },
    };
  }

  return (message: KernelToWorker | null): void => {
    // One or more frames, newline-separated: written as they are, they are lines on stdin.
    if (typeof message === "string") return send(message);
    switch (message?.type) {
      case "start":
        start(message.spec);
        break;
      case "stop":
        void stop(message.graceMs);
        break;
      case "setProtocolVersion":
        // stdio carries no protocol-version header.
        break;
      case "credit":
        credit.refund(message.cost);
        break;
    }
  };
}

function spawnFailure(program: string, error: unknown): string {
  const name = error instanceof Error ? error.name : "Error";
  const message = error instanceof Error ? error.message : String(error);
  if (name === "NotFound") {
    return `cannot spawn "${program}": command not found (check the server's command and PATH)`;
  }
  if (name === "NotCapable" || name === "PermissionDenied") {
    return `cannot spawn "${program}": the relay worker may only run its configured command ` +
      `(${name}: ${message})`;
  }
  return `cannot spawn "${program}": ${name}: ${message}`;
}

function describe(status: Deno.CommandStatus): string {
  return status.signal ? `signal ${status.signal}` : `code ${status.code}`;
}

function preview(bytes: Uint8Array): string {
  return lenient.decode(bytes.subarray(0, PREVIEW_CHARS * 4)).slice(0, PREVIEW_CHARS);
}

/** A top-level `"id"` member: preceded by `{` or `,`, never inside an escaped JSON string. */
const ID_MEMBER = /[{,]\s*"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)\s*[,}]/g;

/**
 * The id of the response an oversized frame carried, so its caller can be answered at once:
 * serializers put it last (the SDK) or first, so the last match in the tail, else a leading one.
 */
export function responseId(preview: string, tail: string): string | number | undefined {
  // A request or notification from the upstream (its "method" comes before any result) is no
  // answer to one of ours.
  const method = preview.search(/"method"\s*:/);
  const answer = preview.search(/"(?:result|error)"\s*:/);
  if (method !== -1 && (answer === -1 || method < answer)) return undefined;
  const last = [...tail.matchAll(ID_MEMBER)].at(-1)?.[1];
  const first = /^\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)/
    .exec(preview)?.[1];
  const raw = last ?? first;
  if (raw === undefined) return undefined;
  try {
    const id = JSON.parse(raw) as unknown;
    return typeof id === "string" || Number.isSafeInteger(id) ? id as string | number : undefined;
  } catch {
    return undefined;
  }
}
