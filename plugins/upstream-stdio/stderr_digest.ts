/**
 * A child's stderr as an operator reads it: terminal escapes removed, and an error folded into
 * its first line. Deno prints an uncaught error as a coloured first line, a source excerpt and a
 * dozen stack frames; the kernel keeps only the last few stderr lines for `lastError`, so unfolded
 * those would be the frames' tail and never the line that says what went wrong.
 * @module
 */
import { type Clock, systemClock, type TimerHandle } from "../../core/plugin_api/clock.ts";
import { plainText } from "../../core/plugin_api/stdio_framing.ts";

/** How long an error block may pause before it is reported as it stands. */
const BLOCK_IDLE_MS = 50;

/**
 * The first line of an error report: Deno's `error: …`, an `Uncaught …`, or a Node-style
 * `TypeError: …` / `Error [ERR_X]: …` / `NotCapable: …`.
 */
const ERROR_HEAD =
  /^(?:error: |Uncaught |[A-Za-z_$][\w$]*(?:Error|Exception|NotCapable|PermissionDenied)(?: \[[\w-]+\])?: )/;

/** A stack frame: `    at fn (file:line:col)`. */
const FRAME = /^\s+at\s+(.*)$/;

/** Frames inside the runtime, which say less than the first frame in the program's own code. */
const RUNTIME_FRAME = /\((?:ext|node):|^(?:ext|node):/;

/** The caret line under a source excerpt: `      ^`. */
const CARET = /^\s*\^+\s*$/;

interface Block {
  head: string;
  frames: number;
  where?: string;
  /**
   * An unindented line right after the head: the source excerpt of top-level code, which Deno
   * prints at column 0. It belongs to the block only if a caret line follows it.
   */
  excerpt?: string;
  /** Whether the excerpt was confirmed by its caret line. */
  excerptConfirmed?: boolean;
}

/** Folds stderr lines and reports each as `post(line)`; call {@link StderrDigest.end} when the stream ends. */
export class StderrDigest {
  readonly #post: (line: string) => void;
  readonly #maxChars: number;
  #block: Block | undefined;
  readonly #clock: Clock;
  #timer: TimerHandle | undefined;

  /** `maxChars` bounds every reported line; an error block's pause is timed on `clock`. */
  constructor(post: (line: string) => void, maxChars: number, clock: Clock = systemClock) {
    this.#post = post;
    this.#maxChars = maxChars;
    this.#clock = clock;
  }

  /** Takes one raw stderr line (without its newline). */
  push(raw: string): void {
    const line = plainText(raw).trimEnd();
    if (line === "") return;
    const block = this.#block;
    if (block && block.excerpt !== undefined && !block.excerptConfirmed) {
      if (CARET.test(line)) {
        block.excerptConfirmed = true;
        this.#arm();
        return;
      }
      // Not an excerpt after all: the head stands alone and the held line is ordinary output.
      const held = block.excerpt;
      delete block.excerpt;
      this.#flush();
      this.#emit(held);
      return this.push(raw);
    }
    if (
      block && block.frames === 0 && block.excerpt === undefined && !/^\s/.test(line) &&
      !ERROR_HEAD.test(line)
    ) {
      block.excerpt = line;
      this.#arm();
      return;
    }
    // Indented lines after an error head are its source excerpt, caret and stack frames.
    if (block && /^\s/.test(line)) {
      const frame = FRAME.exec(line)?.[1];
      if (frame !== undefined) {
        block.frames++;
        if (
          block.where === undefined ||
          (RUNTIME_FRAME.test(block.where) && !RUNTIME_FRAME.test(frame))
        ) {
          block.where = frame;
        }
      }
      this.#arm();
      return;
    }
    this.#flush();
    if (ERROR_HEAD.test(line)) {
      this.#block = { head: line, frames: 0 };
      this.#arm();
    } else {
      this.#emit(line);
    }
  }

  /** Reports an error block still held back, and stops its timer. */
  end(): void {
    this.#flush();
  }

  #arm(): void {
    this.#timer?.cancel();
    this.#timer = this.#clock.setTimeout(() => this.#flush(), BLOCK_IDLE_MS);
  }

  #flush(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    const block = this.#block;
    if (!block) return;
    this.#block = undefined;
    const held = block.excerpt !== undefined && !block.excerptConfirmed ? block.excerpt : undefined;
    if (block.frames === 0) {
      this.#emit(block.head);
      if (held !== undefined) this.#emit(held);
      return;
    }
    const more = block.frames > 1 ? `; ${block.frames - 1} more stack frames` : "";
    this.#emit(`${block.head} (at ${block.where}${more})`);
  }

  #emit(line: string): void {
    this.#post(line.length > this.#maxChars ? `${line.slice(0, this.#maxChars - 1)}…` : line);
  }
}
