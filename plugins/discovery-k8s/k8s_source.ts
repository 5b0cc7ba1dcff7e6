/**
 * Finds MCP servers among Kubernetes Services: those annotated `agent33.io/mcp: "true"`, with the
 * endpoint from `agent33.io/mcp-port`, `agent33.io/mcp-path` (default `/mcp`) and
 * `agent33.io/mcp-transport` (`http`, the default, or `sse`). Lists, then watches from the list's
 * resourceVersion; a dropped watch resumes from the last version seen, and a `410 Gone` relists.
 * @module
 */
import {
  type Clock,
  deadline,
  type DiscoveryCandidate,
  type DiscoverySource,
  pause,
  systemClock,
} from "../../core/plugin_api/mod.ts";

/** The annotations this source reads. */
export const ANNOTATIONS = {
  enabled: "agent33.io/mcp",
  port: "agent33.io/mcp-port",
  path: "agent33.io/mcp-path",
  transport: "agent33.io/mcp-transport",
} as const;

/** Largest list response read, in bytes (16 MiB). */
export const MAX_LIST_BYTES = 16 * 1024 * 1024;
/** Longest watch event line, in characters (1 MiB). */
export const MAX_WATCH_LINE_CHARS = 1024 * 1024;
/** Most Services one list may hold. */
export const MAX_LIST_ITEMS = 10_000;

/** How to reach the API server. */
export interface K8sOptions {
  /** Base URL, e.g. `https://10.0.0.1:443`. */
  api: string;
  token?: string;
  /** Only this namespace; all namespaces when unset. */
  namespace?: string;
  /** Injectable for tests and for the in-cluster CA. */
  fetch?: typeof fetch;
  /** Where `api` and the credentials came from, named when the API refuses (e.g. `MCP_K8S_API`). */
  origin?: string;
  /** Wait before reconnecting a failed watch (default 1 s). */
  backoffMs?: number;
  /**
   * How long the API server may take to answer a request's headers (a watch's included); past it
   * the request is dropped and fails naming `timeoutSetting`. Unbounded when unset.
   */
  timeoutMs?: number;
  /** The setting named when a request times out (default `MCP_DISCOVERY_TIMEOUT_MS`). */
  timeoutSetting?: string;
  /** The clock of that timeout and of the watch's backoff (the gateway's); the real one by default. */
  clock?: Clock;
}

/** The API server accepted a request but did not answer it in time. */
export class K8sTimeoutError extends Error {
  constructor(url: string, ms: number, setting: string) {
    super(
      `Kubernetes API ${url} did not answer within ${ms} ms (${setting}); ` +
        "check that the API server is reachable and not overloaded",
    );
    this.name = "K8sTimeoutError";
  }
}

/** The API server sent more than a bound allows; the source stops rather than buffer it. */
export class K8sLimitError extends Error {
  constructor(url: string, what: string) {
    super(
      `Kubernetes API ${url} sent ${what}; nothing more was read from it. Narrow discovery ` +
        "to one namespace (MCP_K8S_NAMESPACE) or check that the API server is the real one",
    );
    this.name = "K8sLimitError";
  }
}

/** The parts of a Service this source reads. */
interface Service {
  metadata?: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  spec?: { ports?: { port?: number; name?: string }[] };
}

/** A discovery source over the Kubernetes API. */
export class K8sSource implements DiscoverySource {
  #options: K8sOptions;

  constructor(options: K8sOptions) {
    this.#options = options;
  }

  /** The last list, until a watch starts from it (list-then-watch, like an informer). */
  #listed: { candidates: DiscoveryCandidate[]; version: string } | undefined;

  /** Every annotated Service now. */
  async list(signal?: AbortSignal): Promise<DiscoveryCandidate[]> {
    this.#listed = await this.#list(signal);
    return this.#listed.candidates;
  }

  /**
   * Follows the watch until `signal` aborts: from the list just made when there is one (its
   * candidates already announced), else it lists first.
   */
  async *discover(signal: AbortSignal): AsyncIterable<DiscoveryCandidate> {
    const listed = this.#listed;
    this.#listed = undefined;
    let version = listed?.version || undefined;
    // What this feed has announced: a relist says which of them went away meanwhile.
    const announced = new Set<string>(listed?.candidates.map((c) => c.id) ?? []);
    while (!signal.aborted) {
      try {
        if (version === undefined) {
          const listed = await this.#list(signal);
          version = listed.version;
          const now = new Set(listed.candidates.map((c) => c.id));
          for (const id of [...announced].filter((id) => !now.has(id))) {
            announced.delete(id);
            yield { ...removedStub(id), removed: true };
          }
          for (const candidate of listed.candidates) announced.add(candidate.id);
          yield* listed.candidates;
        }
        for await (const event of this.#watch(version, signal)) {
          if (event.type === "ERROR") {
            // 410 Gone: the version is too old to resume from; start over with a list.
            version = undefined;
            break;
          }
          version = event.object.metadata?.resourceVersion ?? version;
          if (event.type === "BOOKMARK") continue;
          const candidate = toCandidate(event.object);
          if (event.type === "DELETED" || candidate === undefined) {
            const id = serviceId(event.object);
            if (id) {
              announced.delete(id);
              yield { ...removedStub(id), removed: true };
            }
          } else {
            announced.add(candidate.id);
            yield candidate;
          }
        }
      } catch (error) {
        if (signal.aborted) return;
        // A refused list is a configuration problem, and a stalled server is no dropped watch:
        // surface both rather than spin.
        if (
          version === undefined || error instanceof K8sTimeoutError ||
          error instanceof K8sLimitError
        ) throw error;
      }
      await pause(this.#options.clock ?? systemClock, this.#options.backoffMs ?? 1_000, signal);
    }
  }

  async #list(
    signal?: AbortSignal,
  ): Promise<{ candidates: DiscoveryCandidate[]; version: string }> {
    const path = this.#servicesPath();
    const response = await this.#get(path, signal);
    const body = JSON.parse(await boundedText(response, this.#url(path))) as {
      metadata?: { resourceVersion?: string };
      items?: Service[];
    };
    const items = Array.isArray(body.items) ? body.items : [];
    if (items.length > MAX_LIST_ITEMS) {
      throw new K8sLimitError(
        this.#url(path),
        `${items.length} Services in one list, more than ${MAX_LIST_ITEMS}`,
      );
    }
    const candidates = items.map(toCandidate).filter((c) => c !== undefined);
    return { candidates, version: body.metadata?.resourceVersion ?? "" };
  }

  async *#watch(
    version: string,
    signal: AbortSignal,
  ): AsyncIterable<{ type: string; object: Service }> {
    const query = `watch=1&allowWatchBookmarks=true${
      version ? `&resourceVersion=${encodeURIComponent(version)}` : ""
    }`;
    const path = `${this.#servicesPath()}?${query}`;
    const response = await this.#get(path, signal);
    const lines = response.body!.pipeThrough(new TextDecoderStream()).pipeThrough(
      splitLines(this.#url(path)),
    );
    for await (const line of lines) {
      if (line.trim() === "") continue;
      yield JSON.parse(line);
    }
  }

  #servicesPath(): string {
    const ns = this.#options.namespace;
    return ns ? `/api/v1/namespaces/${encodeURIComponent(ns)}/services` : "/api/v1/services";
  }

  #url(path: string): string {
    return this.#options.api.replace(/\/$/, "") + path;
  }

  async #get(path: string, signal?: AbortSignal): Promise<Response> {
    const url = this.#url(path);
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.#options.token) headers.authorization = `Bearer ${this.#options.token}`;
    const { timeoutMs } = this.#options;
    const limit = timeoutMs === undefined
      ? undefined
      : deadline(this.#options.clock ?? systemClock, timeoutMs);
    const signals = [signal, limit?.signal].filter((s) => s !== undefined);
    let response: Response;
    try {
      response = await (this.#options.fetch ?? fetch)(url, {
        headers,
        ...(signals.length ? { signal: AbortSignal.any(signals) } : {}),
      });
    } catch (error) {
      if (!limit?.passed || signal?.aborted) throw error;
      throw new K8sTimeoutError(
        url,
        timeoutMs!,
        this.#options.timeoutSetting ?? "MCP_DISCOVERY_TIMEOUT_MS",
      );
    } finally {
      // Bounded until the headers: a watch's body then streams for as long as the server keeps it.
      limit?.cancel();
    }
    if (!response.ok) {
      const text = await boundedText(response, url, 64 * 1024).catch(() => "");
      throw new Error(
        `Kubernetes API ${url} answered ${response.status}: ${text.slice(0, 200)}; ` +
          `check ${this.#options.origin ?? "MCP_K8S_API"} and that its credentials may list ` +
          "and watch services (deploy/kubernetes/rbac.yaml grants exactly that)",
      );
    }
    return response;
  }
}

/** `<namespace>/<name>`, the candidate id of a Service. */
function serviceId(service: Service): string | undefined {
  const { name, namespace } = service.metadata ?? {};
  return name ? `${namespace ?? "default"}/${name}` : undefined;
}

function removedStub(id: string): DiscoveryCandidate {
  return { id, source: "k8s", transport: "http", url: "" };
}

/** The candidate of an annotated Service, or undefined. */
export function toCandidate(service: Service): DiscoveryCandidate | undefined {
  const annotations = service.metadata?.annotations ?? {};
  const id = serviceId(service);
  if (annotations[ANNOTATIONS.enabled] !== "true" || id === undefined) return undefined;
  const port = Number(annotations[ANNOTATIONS.port] ?? service.spec?.ports?.[0]?.port);
  if (!Number.isInteger(port) || port <= 0) return undefined;
  const rawPath = annotations[ANNOTATIONS.path] ?? "/mcp";
  const path = rawPath.startsWith("/") ? rawPath : `/${rawPath}`;
  const transport = annotations[ANNOTATIONS.transport] === "sse" ? "sse" : "http";
  const { name, namespace = "default" } = service.metadata!;
  return {
    id,
    source: "k8s",
    transport,
    url: `http://${name}.${namespace}.svc:${port}${path}`,
    // The Service's own labels first: one labelled `namespace` or `service` must not pass for
    // another namespace's or Service's on the card an operator judges it by.
    labels: { ...(service.metadata?.labels ?? {}), namespace, service: name! },
  };
}

/** A response body as text, read no further than `max` bytes (throws {@link K8sLimitError}). */
async function boundedText(response: Response, url: string, max = MAX_LIST_BYTES): Promise<string> {
  const declared = Number(response.headers.get("content-length") ?? NaN);
  const over = () => new K8sLimitError(url, `a response of more than ${max} bytes`);
  if (declared > max) {
    await response.body?.cancel();
    throw over();
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = response.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > max) {
      await reader.cancel();
      throw over();
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return new TextDecoder().decode(bytes);
}

/**
 * Splits a text stream into lines (watch events are one JSON object per line); a line longer than
 * {@link MAX_WATCH_LINE_CHARS} fails the stream, which cancels the response.
 */
function splitLines(url: string): TransformStream<string, string> {
  let rest = "";
  return new TransformStream({
    transform(chunk, controller) {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop() ?? "";
      for (const part of parts) {
        if (part.length > MAX_WATCH_LINE_CHARS) throw tooLong(url);
        controller.enqueue(part);
      }
      if (rest.length > MAX_WATCH_LINE_CHARS) throw tooLong(url);
    },
    flush(controller) {
      if (rest) controller.enqueue(rest);
    },
  });
}

function tooLong(url: string): K8sLimitError {
  return new K8sLimitError(
    url,
    `a watch event line of more than ${MAX_WATCH_LINE_CHARS} characters`,
  );
}
