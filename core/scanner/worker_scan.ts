/**
 * WorkerScan: runs scans in the scanner's worker (scan_worker.ts), one at a time, so the
 * gateway's event loop stays free while a fleet is scanned.
 * @module
 */
import type { ServerDescriptor } from "./descriptor.ts";
import type { ScanResult } from "./scan.ts";

/** Scans descriptor sets off the main thread with the scanner-rule plugins of `dirs`. */
export class WorkerScan {
  #worker: Worker;
  #pending = new Map<number, PromiseWithResolvers<ScanResult>>();
  #next = 0;
  #dead: string | undefined;

  constructor(dirs: readonly string[]) {
    this.#worker = new Worker(new URL("./scan_worker.ts", import.meta.url), {
      type: "module",
      name: "scanner",
    });
    this.#worker.onmessage = (event) => {
      const m = event.data as
        | { type: "ready" }
        | { type: "result"; id: number; result: ScanResult }
        | { type: "error"; id: number; error: string };
      if (m.type === "ready") return;
      const waiter = this.#pending.get(m.id);
      this.#pending.delete(m.id);
      if (m.type === "result") waiter?.resolve(m.result);
      else waiter?.reject(new Error(`scanner worker: ${m.error}`));
    };
    this.#worker.onerror = (event) => {
      // Without preventDefault an uncaught error in the worker is rethrown in the gateway.
      event.preventDefault();
      this.#fail(`scanner worker crashed: ${event.message}`);
    };
    this.#worker.postMessage({ type: "init", dirs: [...dirs] });
  }

  /** Scans in the worker; rejects if the worker crashed or was closed. */
  scan(descriptors: readonly ServerDescriptor[]): Promise<ScanResult> {
    if (this.#dead) return Promise.reject(new Error(this.#dead));
    const id = this.#next++;
    const waiter = Promise.withResolvers<ScanResult>();
    this.#pending.set(id, waiter);
    this.#worker.postMessage({ type: "scan", id, descriptors });
    return waiter.promise;
  }

  /** Ends the worker; scans in flight reject. */
  close(): void {
    this.#fail("the scanner was closed");
  }

  #fail(reason: string): void {
    if (this.#dead) return;
    this.#dead = reason;
    this.#worker.terminate();
    for (const waiter of this.#pending.values()) waiter.reject(new Error(reason));
    this.#pending.clear();
  }
}
