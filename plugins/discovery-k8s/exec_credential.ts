/**
 * Runs a kubeconfig `exec` credential plugin (the client-go protocol): the command gets the
 * kubeconfig's args and env on top of ours plus `KUBERNETES_EXEC_INFO`, and prints an
 * `ExecCredential` whose `status` carries a token or a client certificate and key, valid until
 * `expirationTimestamp` when it has one. Non-interactive: stdin is closed.
 * @module
 */
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

/** Runs `exec` and returns its credential; throws naming the command and the fix. */
export async function runExecCredential(
  exec: ExecConfig,
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<Credentials> {
  const what = `exec credential plugin "${exec.command}"`;
  if (!API_VERSIONS.has(exec.apiVersion)) {
    throw new Error(
      `${what}: apiVersion ${exec.apiVersion} is not supported; use client.authentication.k8s.io/v1`,
    );
  }
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), options.timeoutMs);
  const signal = options.signal
    ? AbortSignal.any([options.signal, deadline.signal])
    : deadline.signal;
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(exec.command, {
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
    }).output();
  } catch (error) {
    if (deadline.signal.aborted) {
      throw new Error(`${what} did not answer within ${options.timeoutMs} ms`);
    }
    const hint = exec.installHint ? `; ${exec.installHint.trim()}` : "";
    throw new Error(`${what} could not run: ${(error as Error).message}${hint}`);
  } finally {
    clearTimeout(timer);
  }
  if (deadline.signal.aborted) {
    throw new Error(`${what} did not answer within ${options.timeoutMs} ms`);
  }
  if (!output.success) {
    const stderr = new TextDecoder().decode(output.stderr.subarray(0, 400)).trim();
    throw new Error(`${what} exited with ${output.code}${stderr ? `: ${stderr}` : ""}`);
  }
  if (output.stdout.byteLength > MAX_EXEC_OUTPUT_BYTES) {
    throw new Error(`${what} printed more than ${MAX_EXEC_OUTPUT_BYTES} bytes`);
  }
  return parseExecCredential(new TextDecoder().decode(output.stdout), exec.apiVersion, what);
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
