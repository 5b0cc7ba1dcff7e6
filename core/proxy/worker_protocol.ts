/**
 * Messages between the kernel and an upstream's sandboxed worker, as discriminated unions checked
 * on receipt. Errors cross as plain `{ code, message, data }`, never as class instances.
 * @module
 */
import type { SerializedError } from "../support/errors.ts";

/** What the worker needs to reach its upstream; resolved by the kernel (no env lookups inside). */
export interface WorkerStartSpec {
  serverId: string;
  transport: "stdio" | "http" | "sse";
  /** stdio: the full argv to spawn. */
  command?: string[];
  /** stdio: the child's complete environment (the child inherits nothing else). */
  env?: Record<string, string>;
  /** stdio: working directory. */
  cwd?: string;
  /** http / sse: the upstream URL. */
  url?: string;
  /** http / sse: extra request headers. */
  headers?: Record<string, string>;
  /**
   * http / sse: connect through this SOCKS5 proxy (`socks5h://127.0.0.1:PORT`, the gateway's
   * egress guard, for entries a registry wrote): the name is resolved and checked there, never
   * by the worker.
   */
  egressProxy?: string;
  /** Largest frame accepted from the upstream. */
  maxMessageBytes: number;
}

/**
 * Kernel → worker. A bare string is one or more JSON-RPC messages, serialized and separated by
 * newlines, to relay in order: the hot path posts text, which crosses threads far cheaper than a
 * structured clone of the object, and the frames of one turn go together.
 */
export type KernelToWorker =
  | string
  | { type: "start"; spec: WorkerStartSpec }
  | { type: "stop"; graceMs: number }
  /** The negotiated MCP version, for transports that send it as `MCP-Protocol-Version`. */
  | { type: "setProtocolVersion"; version: string }
  /**
   * The kernel has taken `cost` worth of the relay's messages (core/plugin_api/relay_credit.ts):
   * a relay that bounds what it has outstanding reads on; others ignore it.
   */
  | { type: "credit"; cost: number };

/**
 * Worker → kernel. A bare string is one or more frames from the upstream, as text, separated by
 * newlines (the kernel parses them);
 * `message` carries a message the worker already holds as an object (SDK client transports).
 */
export type WorkerToKernel =
  | string
  | { type: "started"; pid?: number }
  /**
   * `related`: the id of the request on whose response stream the message arrived; `size`: its
   * JSON's length, what it costs of the relay's credit (relay_credit.ts).
   */
  | { type: "message"; message: unknown; related?: string | number; size?: number }
  | { type: "stderr"; line: string }
  /** `id`: the request a dropped (oversized) response answered, when the worker could tell. */
  | { type: "malformed"; reason: string; preview: string; id?: string | number }
  | { type: "closed"; reason: string; code?: number | null; signal?: string | null }
  | { type: "error"; error: SerializedError };

const WORKER_TYPES = new Set(["started", "message", "stderr", "malformed", "closed", "error"]);
const KERNEL_TYPES = new Set(["start", "stop", "setProtocolVersion", "credit"]);

/** Narrows a message received from a worker; anything else is `undefined`. */
export function parseWorkerMessage(data: unknown): WorkerToKernel | undefined {
  if (typeof data === "string") return data;
  const type = (data as { type?: unknown } | null)?.type;
  return typeof type === "string" && WORKER_TYPES.has(type) ? data as WorkerToKernel : undefined;
}

/** Narrows a message received from the kernel; anything else is `undefined`. */
export function parseKernelMessage(data: unknown): KernelToWorker | undefined {
  if (typeof data === "string") return data;
  const type = (data as { type?: unknown } | null)?.type;
  return typeof type === "string" && KERNEL_TYPES.has(type) ? data as KernelToWorker : undefined;
}
