/**
 * InlineRelayPort: an upstream's relay run in the kernel's own thread (`isolation: inline`),
 * behind the same message interface as its worker.
 *
 * The worker hop costs two thread wake-ups and two message copies per call; for a stdio upstream
 * the worker confines only the relay's framing code (the child process is sandboxed on its own,
 * by `sandbox: deno`), so an operator may trade that confinement for latency. Messages still cross
 * asynchronously, on a later microtask, so neither side ever runs inside the other's call.
 * @module
 */
import type { InlineRelay } from "../plugin_api/mod.ts";
import type { KernelToWorker, WorkerToKernel } from "./worker_protocol.ts";

/** The part of a `Worker` the transport uses. */
export interface RelayPort {
  postMessage(message: KernelToWorker): void;
  terminate(): void;
}

/** A relay in this thread, posting to `receive` and reporting a throw to `crashed`. */
export class InlineRelayPort implements RelayPort {
  readonly #deliver: (message: KernelToWorker | null) => void;
  readonly #crashed: (detail: string) => void;
  #terminated = false;

  constructor(
    relay: InlineRelay,
    receive: (message: WorkerToKernel) => void,
    crashed: (detail: string) => void,
  ) {
    this.#crashed = crashed;
    this.#deliver = relay((message) => {
      if (this.#terminated) return;
      queueMicrotask(() => {
        if (!this.#terminated) receive(message);
      });
    });
  }

  postMessage(message: KernelToWorker): void {
    queueMicrotask(() => {
      if (this.#terminated) return;
      try {
        this.#deliver(message);
      } catch (error) {
        this.#crashed(error instanceof Error ? error.message : String(error));
      }
    });
  }

  /** Stops delivering both ways; the transport then ends the child's process group. */
  terminate(): void {
    this.#terminated = true;
  }
}
