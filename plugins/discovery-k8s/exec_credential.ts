/**
 * Runs a kubeconfig `exec` credential plugin (the client-go protocol): the command gets the
 * kubeconfig's args and env on top of ours plus `KUBERNETES_EXEC_INFO`, and prints an
 * `ExecCredential` whose `status` carries a token or a client certificate and key, valid until
 * `expirationTimestamp` when it has one. Non-interactive: stdin is closed.
 * @module
 */
import { type Clock, deadline, systemClock } from "../../core/plugin_api/mod.ts";
import type { ExecConfig } from "./kubeconfig.ts";

/** What an API request authenticates with. */
export interface Credentials {
  token?: string;
  /** PEM client certificate and key. */
  cert?: string;
  key?: string;
  /** Epoch ms after which the credential must be fetched again; forever when unset. */
  expiresAt?: number;
}

/** The largest ExecCredential we read. */
export const MAX_EXEC_OUTPUT_BYTES = 1 << 20;

const API_VERSIONS = new Set([
  "client.authentication.k8s.io/v1",
  "client.authentication.k8s.io/v1beta1",
]);

/** Runs `exec` and returns its credential (timed on `clock`); throws naming the command and the fix. */
export async function runExecCredential(
  exec: ExecConfig,
  options: { timeoutMs: number; signal?: AbortSignal; clock?: Clock },
): Promise<Credentials> {
  const what = `exec credential plugin "${exec.command}"`;
  if (!API_VERSIONS.has(exec.apiVersion)) {
    throw new Error(
      `${what}: apiVersion ${exec.apiVersion} is not supported; use client.authentication.k8s.io/v1`,
    );
  }
  const limit = deadline(options.clock ?? systemClock, options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, limit.signal]) : limit.signal;
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(exec.command, {
      args: exec.args,
      env: {
        ...exec.env,
        KUBERNETES_EXEC_INFO: JSON.stringify({
          apiVersion: exec.apiVersion,
          kind: "ExecCredential",
          spec: { interactive: false },
        }),
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal,
    }).spawn();
  } catch (error) {
    limit.cancel();
    const hint = exec.installHint ? `; ${exec.installHint.trim()}` : "";
    throw new Error(`${what} could not run: ${(error as Error).message}${hint}`);
  }
  let stdout: Capped, stderr: Capped, status: Deno.CommandStatus;
  try {
    // Read both pipes as they fill, so a chatty plugin neither blocks nor grows without bound.
    [stdout, stderr, status] = await Promise.all([
      readCapped(child.stdout, MAX_EXEC_OUTPUT_BYTES, () => {
        try {
          child.kill();
        } catch { /* it has just exited */ }
      }),
      readCapped(child.stderr, 400),
      child.status,
    ]);
  } finally {
    limit.cancel();
  }
  if (limit.passed) {
    throw new Error(`${what} did not answer within ${options.timeoutMs} ms`);
  }
  if (stdout.over) {
    throw new Error(`${what} printed more than ${MAX_EXEC_OUTPUT_BYTES} bytes`);
  }
  if (!status.success) {
    const text = new TextDecoder().decode(stderr.bytes).trim();
    throw new Error(`${what} exited with ${status.code}${text ? `: ${text}` : ""}`);
  }
  return parseExecCredential(new TextDecoder().decode(stdout.bytes), exec.apiVersion, what);
}

/** The first bytes of a stream, and whether there were more. */
interface Capped {
  bytes: Uint8Array;
  over: boolean;
}

/**
 * Reads `stream`, keeping at most `max` bytes; past that, with `onOver` it calls it and stops
 * reading, without it reads the rest and drops it (a verbose stderr is no failure).
 */
async function readCapped(
  stream: ReadableStream<Uint8Array>,
  max: number,
  onOver?: () => void,
): Promise<Capped> {
  const kept: Uint8Array[] = [];
  let size = 0;
  let over = false;
  for await (const chunk of stream) {
    if (size + chunk.byteLength > max) {
      if (!over) kept.push(chunk.subarray(0, max - size));
      over = true;
      size = max;
      if (onOver) {
        onOver();
        break;
      }
    } else if (!over) {
      kept.push(chunk);
      size += chunk.byteLength;
    }
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const part of kept) {
    bytes.set(part, at);
    at += part.byteLength;
  }
  return { bytes, over };
}

/** The credential in an ExecCredential document, checked field by field. */
export function parseExecCredential(text: string, apiVersion: string, what: string): Credentials {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error(`${what} printed no ExecCredential JSON`);
  }
  const object = doc as Record<string, unknown> | null;
  if (object?.kind !== "ExecCredential" || object.apiVersion !== apiVersion) {
    throw new Error(`${what} printed no ExecCredential of apiVersion ${apiVersion}`);
  }
  const status = (object.status ?? {}) as Record<string, unknown>;
  const str = (key: string) => typeof status[key] === "string" && status[key] !== "";
  const credentials: Credentials = {};
  if (str("token")) credentials.token = status.token as string;
  if (str("clientCertificateData") && str("clientKeyData")) {
    credentials.cert = status.clientCertificateData as string;
    credentials.key = status.clientKeyData as string;
  }
  if (credentials.token === undefined && credentials.cert === undefined) {
    throw new Error(
      `${what}: its ExecCredential status has neither a token nor clientCertificateData and clientKeyData`,
    );
  }
  if (status.expirationTimestamp !== undefined) {
    const at = typeof status.expirationTimestamp === "string"
      ? Date.parse(status.expirationTimestamp)
      : NaN;
    if (Number.isNaN(at)) {
      throw new Error(`${what}: expirationTimestamp is not an RFC 3339 time`);
    }
    credentials.expiresAt = at;
  }
  return credentials;
}
