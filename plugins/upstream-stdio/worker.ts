/**
 * The stdio relay worker: runs the relay (relay.ts) confined to `run` of its one command, so it
 * cannot open files or sockets even if the relay were subverted.
 * @module
 */
import type { WorkerToKernel } from "../../core/plugin_api/mod.ts";
import { createStdioRelay } from "./relay.ts";

/** The parts of the worker global scope this relay uses (typed here: the project lib is deno.window). */
interface WorkerScope {
  onmessage: ((event: MessageEvent) => void) | null;
  postMessage(message: WorkerToKernel): void;
}

const scope = globalThis as unknown as WorkerScope;
const relay = createStdioRelay((message) => scope.postMessage(message));
scope.onmessage = (event) => relay(event.data);
