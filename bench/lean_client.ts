/**
 * Bench support: a lean JSON-RPC client, the other side of every "lean" scenario.
 *
 * The SDK's `Client` costs about as much per call as a small server does (zod on every message),
 * so with it alone a benchmark partly measures the client. This one writes a request, matches the
 * response by id and checks the echo — nothing else — over a child's stdio or Streamable HTTP.
 * It is a measuring instrument, never used by the gateway.
 * @module
 */
import { bounded, type Child } from "./processes.ts";

/** A connected lean client. */
export interface LeanClient {
  /** Sends a request and resolves with its `result`; rejects on an error response. */
  request(method: string, params: Record<string, unknown>): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

const INITIALIZE = {
  protocolVersion: "2025-06-18",
  capabilities: {},
  clientInfo: { name: "agent33-bench-lean", version: "1.0.0" },
};

type Response = { id?: unknown; result?: Record<string, unknown>; error?: { message?: string } };

/** Settles responses by id. */
class Pending {
  #next = 0;
  #waiting = new Map<number, { resolve(r: Response): void; reject(e: Error): void }>();

  open(): { id: number; response: Promise<Response> } {
    const id = ++this.#next;
    const { promise, resolve, reject } = Promise.withResolvers<Response>();
    this.#waiting.set(id, { resolve, reject });
    return { id, response: promise };
  }

  settle(message: Response): void {
    if (typeof message.id !== "number") return;
    const waiter = this.#waiting.get(message.id);
    this.#waiting.delete(message.id);
    waiter?.resolve(message);
  }

  failAll(error: Error): void {
    for (const waiter of this.#waiting.values()) waiter.reject(error);
    this.#waiting.clear();
  }
}

function resultOf(message: Response, method: string): Record<string, unknown> {
  if (message.error || !message.result) {
    throw new Error(`${method} failed: ${JSON.stringify(message.error ?? message).slice(0, 300)}`);
  }
  return message.result;
}

/** A lean client over a child's stdin/stdout (newline-delimited JSON-RPC). */
export async function leanStdio(child: Child): Promise<LeanClient> {
  const writer = child.process.stdin.getWriter();
  const encoder = new TextEncoder();
  const pending = new Pending();
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of child.process.stdout) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let nl = buffer.indexOf("\n"); nl !== -1; nl = buffer.indexOf("\n")) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (line.trim()) pending.settle(JSON.parse(line));
        }
      }
    } finally {
      pending.failAll(new Error(`${child.name} closed its stdout`));
    }
  })();
  const write = (message: unknown) => writer.write(encoder.encode(JSON.stringify(message) + "\n"));
  const request = async (method: string, params: Record<string, unknown>) => {
    const { id, response } = pending.open();
    await write({ jsonrpc: "2.0", id, method, params });
    return resultOf(await response, method);
  };
  await bounded(request("initialize", INITIALIZE), 60_000, `initialize ${child.name} (lean)`);
  await write({ jsonrpc: "2.0", method: "notifications/initialized" });
  return {
    request,
    close: async () => {
      await writer.close().catch(() => {});
      await bounded(reading.catch(() => {}), 10_000, `${child.name} closing`).catch(() => {});
    },
  };
}

/**
 * A lean client over Streamable HTTP in one session (JSON or SSE responses, whichever comes);
 * `extraHeaders` go on every request (e.g. `authorization`).
 */
export async function leanHttp(
  url: string,
  extraHeaders: Record<string, string> = {},
): Promise<LeanClient> {
  const pending = new Pending();
  let headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    ...extraHeaders,
  };
  const post = async (message: Record<string, unknown>) => {
    const response = await fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify(message),
    });
    const text = await response.text();
    if (response.status === 202) return response;
    if (!response.ok) {
      throw new Error(`POST ${url}: HTTP ${response.status}: ${text.slice(0, 300)}`);
    }
    // An SSE response carries the answer in its data lines; a JSON one is the answer.
    const bodies = text.startsWith("{")
      ? [text]
      : text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim());
    for (const body of bodies) if (body) pending.settle(JSON.parse(body));
    return response;
  };
  const request = async (method: string, params: Record<string, unknown>) => {
    const { id, response } = pending.open();
    await post({ jsonrpc: "2.0", id, method, params });
    return resultOf(await response, method);
  };
  const { id, response } = pending.open();
  const init = await post({ jsonrpc: "2.0", id, method: "initialize", params: INITIALIZE });
  resultOf(await response, "initialize");
  const session = init.headers.get("mcp-session-id");
  headers = {
    ...headers,
    "mcp-protocol-version": INITIALIZE.protocolVersion,
    ...(session ? { "mcp-session-id": session } : {}),
  };
  await post({ jsonrpc: "2.0", method: "notifications/initialized" });
  return {
    request,
    close: async () => {
      if (session) {
        await fetch(url, { method: "DELETE", headers }).then((r) => r.body?.cancel()).catch(
          () => {},
        );
      }
    },
  };
}

/** A `tools/call` of echo with `{ message: "hi" }` that rejects unless the echo came back. */
export function leanEchoCall(
  client: LeanClient,
  tool: string,
  message = "hi",
): () => Promise<void> {
  return async () => {
    const result = await client.request("tools/call", {
      name: tool,
      arguments: { message },
    });
    const content = result.content as { text?: string }[] | undefined;
    if (result.isError || !content?.[0]?.text?.includes(message)) {
      throw new Error(`${tool} answered unexpectedly: ${JSON.stringify(result).slice(0, 300)}`);
    }
  };
}

/** Polls tools/list until `tool` is listed. */
export async function leanWaitForTool(client: LeanClient, tool: string, what: string, ms: number) {
  const deadline = Date.now() + ms;
  for (;;) {
    const { tools } = await client.request("tools/list", {}) as { tools: { name: string }[] };
    if (tools.some((t) => t.name === tool)) return;
    if (Date.now() > deadline) throw new Error(`${what}: tool ${tool} not listed within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
