/**
 * Where the k8s discovery source finds its API server and credentials, in this order:
 * `MCP_K8S_API` (+ `MCP_K8S_TOKEN`); a kubeconfig (`KUBECONFIG`, a `:`-separated list merged like
 * kubectl, else `~/.kube/config`) at `--context` or its current-context; the in-cluster service
 * account (`KUBERNETES_SERVICE_HOST`/`_PORT` with its token and CA). The result is a `fetch` that
 * carries the credentials: a bearer token (static, re-read from a token file every minute, or from
 * an exec plugin until it expires) and/or a client certificate, and trusts the cluster's CA.
 * @module
 */
import type { Clock } from "../../core/plugin_api/mod.ts";
import { type Credentials, runExecCredential } from "./exec_credential.ts";
import { type KubeCluster, type KubeUser, loadKubeconfig, selectContext } from "./kubeconfig.ts";

/** The service account's mount in a pod. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** How long a token read from a file is used before the file is read again (it rotates). */
export const TOKEN_FILE_TTL_MS = 60_000;

/** How long an exec credential plugin may run. */
export const EXEC_TIMEOUT_MS = 30_000;

/** What to resolve from. */
export interface ConnectionOptions {
  env: Record<string, string | undefined>;
  /** The kubeconfig context (`--context`); the current-context when unset. */
  context?: string;
  clock: Clock;
  /** Where the in-cluster token and CA are (tests point it at a temp dir). */
  serviceAccountDir?: string;
}

/** A resolved way to talk to one API server. */
export interface K8sConnection {
  /** Base URL of the API server. */
  api: string;
  /** Where it came from, for messages: `MCP_K8S_API`, `kubeconfig context "x"`, `in-cluster`. */
  origin: string;
  /** `fetch` with the credentials and the cluster's trust; a 401 refreshes them once. */
  fetch: typeof fetch;
  /** Releases the HTTP clients. */
  close(): void;
}

/** Resolves the API server and credentials by the order in the module doc. */
export async function resolveConnection(options: ConnectionOptions): Promise<K8sConnection> {
  const { env } = options;
  if (env.MCP_K8S_API) {
    if (options.context !== undefined) {
      throw new Error(
        "discovery-k8s: --context selects a kubeconfig context, but MCP_K8S_API is set; unset it to use the kubeconfig",
      );
    }
    const token = env.MCP_K8S_TOKEN;
    return connect(env.MCP_K8S_API, "MCP_K8S_API", {}, token ? { token } : {}, options.clock);
  }
  const paths = kubeconfigPaths(env);
  const config = await loadKubeconfig(paths);
  if (config) {
    const selected = selectContext(config, options.context);
    return connect(
      selected.cluster.server,
      `kubeconfig context "${selected.name}"`,
      selected.cluster,
      selected.user,
      options.clock,
    );
  }
  if (env.KUBECONFIG) {
    throw new Error(
      `discovery-k8s: KUBECONFIG names ${
        paths.join(", ")
      }, and none of them exists; fix KUBECONFIG or unset it`,
    );
  }
  if (options.context !== undefined) {
    throw new Error(
      `discovery-k8s: --context "${options.context}" needs a kubeconfig, and there is none (KUBECONFIG unset, ${
        paths[0]
      } missing)`,
    );
  }
  const host = env.KUBERNETES_SERVICE_HOST;
  if (!host) {
    throw new Error(
      `discovery-k8s: not in a cluster (no KUBERNETES_SERVICE_HOST) and no kubeconfig (KUBECONFIG unset, ${
        paths[0]
      } missing); set KUBECONFIG, or MCP_K8S_API (and MCP_K8S_TOKEN), to reach an API server`,
    );
  }
  const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const port = env.KUBERNETES_SERVICE_PORT ?? "443";
  return connect(
    `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    "in-cluster service account",
    { server: "", caFile: `${dir}/ca.crt` },
    { tokenFile: `${dir}/token` },
    options.clock,
  );
}

/** `KUBECONFIG`'s files, or `~/.kube/config`. */
export function kubeconfigPaths(env: Record<string, string | undefined>): string[] {
  const separator = Deno.build.os === "windows" ? ";" : ":";
  const listed = (env.KUBECONFIG ?? "").split(separator).filter(Boolean);
  if (listed.length > 0) return listed;
  const home = env.HOME ?? env.USERPROFILE ?? "";
  return [`${home}/.kube/config`];
}

async function connect(
  api: string,
  origin: string,
  cluster: Omit<KubeCluster, "server"> & { server?: string },
  user: KubeUser,
  clock: Clock,
): Promise<K8sConnection> {
  const where = `discovery-k8s (${origin})`;
  if (!/^https?:\/\//.test(api)) {
    throw new Error(`${where}: server "${api}" is not an http(s) URL`);
  }
  if (cluster.insecureSkipTlsVerify) {
    throw new Error(
      `${where}: insecure-skip-tls-verify is not supported (Deno cannot turn off verification per client); give the cluster certificate-authority or certificate-authority-data`,
    );
  }
  if (cluster.tlsServerName) {
    throw new Error(
      `${where}: tls-server-name is not supported; use a server URL whose host the certificate names`,
    );
  }
  if (user.unsupported) throw new Error(`${where}: ${user.unsupported} is not supported`);
  const caCerts = cluster.caData
    ? [cluster.caData]
    : cluster.caFile
    ? [await readFile(cluster.caFile, `${where}: certificate-authority`)]
    : undefined;
  const staticCert = user.certData ??
    (user.certFile ? await readFile(user.certFile, `${where}: client-certificate`) : undefined);
  const staticKey = user.keyData ??
    (user.keyFile ? await readFile(user.keyFile, `${where}: client-key`) : undefined);
  if ((staticCert === undefined) !== (staticKey === undefined)) {
    throw new Error(`${where}: a client certificate needs both the certificate and its key`);
  }
  const credentials = new CredentialCache(user, clock, where);
  const clients = new Map<string, Deno.HttpClient>();
  const clientFor = (cert?: string, key?: string) => {
    const id = cert && key ? `${cert}\n${key}` : "";
    let client = clients.get(id);
    if (!client) {
      const tls = cert && key ? { cert, key } : {};
      client = Deno.createHttpClient({
        ...(caCerts ? { caCerts } : {}),
        ...(cluster.proxyUrl ? { proxy: { url: cluster.proxyUrl } } : {}),
        ...tls,
      });
      // A rotated exec certificate replaces the old client rather than piling them up.
      for (const [old, stale] of clients) if (old !== "" && old !== id) stale.close();
      for (const old of [...clients.keys()]) if (old !== "" && old !== id) clients.delete(old);
      clients.set(id, client);
    }
    return client;
  };
  const send = async (input: string | URL | Request, init: RequestInit | undefined) => {
    const creds = await credentials.get();
    const headers = new Headers(init?.headers);
    if (creds.token) headers.set("authorization", `Bearer ${creds.token}`);
    const cert = creds.cert ?? staticCert;
    const key = creds.cert ? creds.key : staticKey;
    try {
      return await fetch(input, { ...init, headers, client: clientFor(cert, key) });
    } catch (error) {
      if (init?.signal?.aborted) throw error;
      // Deno's "fetch failed" hides the reason (refused, TLS, DNS) in its cause.
      const cause = (error as Error).cause;
      const reason = cause instanceof Error ? cause.message : (error as Error).message;
      throw new Error(
        `${where}: ${String(input instanceof Request ? input.url : input)} unreachable: ${reason}`,
      );
    }
  };
  const authedFetch: typeof fetch = async (input, init) => {
    const response = await send(input, init);
    if (response.status !== 401 || !credentials.refreshable) return response;
    // client-go's rule: a 401 means the credential may have been rotated; fetch it once more.
    await response.body?.cancel();
    credentials.invalidate();
    return await send(input, init);
  };
  return {
    api: api.replace(/\/+$/, ""),
    origin,
    fetch: authedFetch,
    close() {
      for (const client of clients.values()) client.close();
      clients.clear();
    },
  };
}

/** The user's credentials, fetched when first needed and again when they expire. */
class CredentialCache {
  #user: KubeUser;
  #clock: Clock;
  #where: string;
  #current: Credentials | undefined;
  #pending: Promise<Credentials> | undefined;

  constructor(user: KubeUser, clock: Clock, where: string) {
    this.#user = user;
    this.#clock = clock;
    this.#where = where;
  }

  /** Whether asking again can give a different answer (a file or a plugin). */
  get refreshable(): boolean {
    return this.#user.exec !== undefined || this.#user.tokenFile !== undefined;
  }

  async get(): Promise<Credentials> {
    const current = this.#current;
    if (current && (current.expiresAt === undefined || this.#clock.now() < current.expiresAt)) {
      return current;
    }
    // One refresh at a time: concurrent requests share it.
    this.#pending ??= this.#fetch().finally(() => this.#pending = undefined);
    return this.#current = await this.#pending;
  }

  invalidate(): void {
    this.#current = undefined;
  }

  async #fetch(): Promise<Credentials> {
    const user = this.#user;
    if (user.token) return { token: user.token };
    if (user.tokenFile) {
      const token = (await readFile(user.tokenFile, `${this.#where}: token file`)).trim();
      return { token, expiresAt: this.#clock.now() + TOKEN_FILE_TTL_MS };
    }
    if (user.exec) {
      const credentials = await runExecCredential(user.exec, {
        timeoutMs: EXEC_TIMEOUT_MS,
        clock: this.#clock,
      });
      return credentials;
    }
    return {};
  }
}

async function readFile(path: string, what: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    throw new Error(`${what} ${path} cannot be read: ${(error as Error).message}`);
  }
}
