/**
 * Test support: raw Streamable HTTP requests to a gateway (or a load balancer in front of
 * replicas), seeing exactly what the wire says — the status, the JSON-RPC answer or the transport
 * failure — where the SDK client would retry, reconnect or wait for its own request timeout.
 * @module
 */
import { initializeRequest, mcpHeaders } from "./gateway.ts";

/**
 * Every request on its own connection: Deno's fetch silently sends a request again when the
 * pooled keep-alive connection it used closes under it, so a call whose replica died would be
 * re-sent to a live one and its failure hidden (a duplicate execution, too). Seen in
 * tests/cluster/faults_cluster.ts; real clients with keep-alive retries do the same.
 */
const ONE_CONNECTION_PER_REQUEST = Deno.createHttpClient({ poolMaxIdlePerHost: 0 });

/** How one raw request ended. */
export type RawOutcome =
  | { kind: "answer"; status: number; message: Record<string, unknown> }
  | { kind: "http_error"; status: number; body: string }
  | { kind: "transport_error"; error: string };

/** The JSON-RPC message answering `id` in a JSON or SSE body (undefined if none is there). */
function answerIn(contentType: string, body: string, id: number | string) {
  const messages: unknown[] = [];
  if (contentType.includes("text/event-stream")) {
    for (const line of body.split("\n")) {
      if (line.startsWith("data:")) messages.push(JSON.parse(line.slice(5)));
    }
  } else if (body.trim() !== "") {
    const parsed: unknown = JSON.parse(body);
    messages.push(...(Array.isArray(parsed) ? parsed : [parsed]));
  }
  return messages.find((m): m is Record<string, unknown> =>
    typeof m === "object" && m !== null && (m as { id?: unknown }).id === id
  );
}

/** POSTs one JSON-RPC message to `${base}/mcp` and reads the whole answer. */
export async function rawPost(
  base: string,
  headers: Record<string, string>,
  message: Record<string, unknown>,
): Promise<RawOutcome> {
  let response: Response;
  try {
    response = await fetch(`${base}/mcp`, {
      client: ONE_CONNECTION_PER_REQUEST,
      method: "POST",
      headers,
      body: JSON.stringify(message),
    });
  } catch (error) {
    return { kind: "transport_error", error: String(error) };
  }
  let body: string;
  try {
    body = await response.text();
  } catch (error) {
    return { kind: "transport_error", error: `${response.status}, then ${error}` };
  }
  if (!response.ok || message.id === undefined) {
    return response.ok
      ? { kind: "answer", status: response.status, message: {} }
      : { kind: "http_error", status: response.status, body };
  }
  const answer = answerIn(response.headers.get("content-type") ?? "", body, message.id as number);
  return answer
    ? { kind: "answer", status: response.status, message: answer }
    : { kind: "http_error", status: response.status, body: `no answer to ${message.id}: ${body}` };
}

/** Opens a session (initialize + initialized) at `base`; returns the headers of its requests. */
export async function openRawSession(
  base: string,
  token: string,
): Promise<Record<string, string>> {
  const opened = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: mcpHeaders(token),
    body: JSON.stringify(initializeRequest("2025-11-25")),
  });
  const session = opened.headers.get("mcp-session-id");
  await opened.body?.cancel();
  if (!session) {
    throw new Error(`initialize at ${base} answered ${opened.status} without a session`);
  }
  const headers = mcpHeaders(token, {
    "Mcp-Session-Id": session,
    "Mcp-Protocol-Version": "2025-11-25",
  });
  const initialized = await rawPost(base, headers, {
    jsonrpc: "2.0",
    method: "notifications/initialized",
  });
  if (initialized.kind !== "answer") {
    throw new Error(`notifications/initialized at ${base}: ${JSON.stringify(initialized)}`);
  }
  return headers;
}

let nextId = 1_000;

/** Calls tool `name` on the session of `headers`; the answer's `result` or what went wrong. */
export function rawToolCall(
  base: string,
  headers: Record<string, string>,
  name: string,
  args: Record<string, unknown> = {},
): Promise<RawOutcome> {
  return rawPost(base, headers, {
    jsonrpc: "2.0",
    id: nextId++,
    method: "tools/call",
    params: { name, arguments: args },
  });
}

/** The text of a successful tool call's first content block (undefined otherwise). */
export function resultText(outcome: RawOutcome): string | undefined {
  if (outcome.kind !== "answer") return undefined;
  const result = outcome.message.result as { content?: { text?: string }[]; isError?: boolean };
  return result && !result.isError ? result.content?.[0]?.text : undefined;
}
