import assert from "node:assert/strict";
import { traceContextOf, traceHeadersFetch } from "./trace_headers.ts";

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/** A fetch that answers with the headers it was given. */
function capture(): { fetch: typeof fetch; seen: Headers[] } {
  const seen: Headers[] = [];
  return {
    seen,
    fetch: (_input, init) => {
      seen.push(new Headers(init?.headers));
      return Promise.resolve(new Response(null, { status: 202 }));
    },
  };
}

function call(meta: Record<string, unknown>): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: { name: "t", arguments: {}, _meta: meta },
  });
}

Deno.test("A POSTed request's _meta.traceparent and tracestate go out as headers", async () => {
  const { fetch, seen } = capture();
  await traceHeadersFetch(fetch)("http://u/mcp", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer x" },
    body: call({ traceparent: TRACEPARENT, tracestate: "vendor=1" }),
  });
  assert.equal(seen[0]!.get("traceparent"), TRACEPARENT);
  assert.equal(seen[0]!.get("tracestate"), "vendor=1");
  assert.equal(seen[0]!.get("authorization"), "Bearer x", "the other headers stay");
});

Deno.test("A malformed trace context in _meta sends no header", () => {
  assert.equal(traceContextOf(call({ traceparent: "00-xyz" })), undefined);
  assert.equal(traceContextOf(call({ traceparent: 42 })), undefined);
  assert.equal(traceContextOf("{not json"), undefined);
  // A tracestate that could split the header line is dropped, the traceparent kept.
  assert.deepEqual(traceContextOf(call({ traceparent: TRACEPARENT, tracestate: "a=1\r\nx: y" })), {
    traceparent: TRACEPARENT,
  });
});

Deno.test("Requests without a trace context pass through unchanged", async () => {
  const { fetch, seen } = capture();
  const traced = traceHeadersFetch(fetch);
  await traced("http://u/mcp", { method: "POST", body: call({ progressToken: 1 }) });
  await traced("http://u/mcp", { method: "GET" });
  assert.equal(seen[0]!.get("traceparent"), null);
  assert.equal(seen[1]!.get("traceparent"), null);
});
