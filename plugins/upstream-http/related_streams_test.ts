import assert from "node:assert/strict";
import { markingFetch, streamMarkKey, takeStreamMark } from "./related_streams.ts";

const KEY = streamMarkKey();

function sse(...events: string[]): Response {
  return new Response(events.join(""), { headers: { "content-type": "text/event-stream" } });
}

async function marked(response: Response, body: unknown, method = "POST"): Promise<string> {
  const fetch = markingFetch(KEY, () => Promise.resolve(response));
  const answer = await fetch("http://h/mcp", { method, body: JSON.stringify(body) });
  return await answer.text();
}

const CALL = { jsonrpc: "2.0", id: "a33-4", method: "tools/call", params: { name: "x" } };
const SAMPLING = { jsonrpc: "2.0", id: 0, method: "sampling/createMessage", params: {} };
const RESULT = { jsonrpc: "2.0", id: "a33-4", result: { content: [] } };

Deno.test("Requests and notifications on a POST's event stream are marked with the POSTed id", async () => {
  const text = await marked(
    sse(
      `retry: 500\n\n`,
      `id: e1\ndata: ${JSON.stringify(SAMPLING)}\n\n`,
      `id: e2\ndata: ${JSON.stringify(RESULT)}\n\n`,
    ),
    CALL,
  );
  const datas = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) =>
    JSON.parse(l.slice(6))
  );
  assert.match(text, /^retry: 500\n\nid: e1\n/);
  const [request, result] = datas;
  assert.equal(takeStreamMark(request, KEY), "a33-4");
  assert.deepEqual(request, SAMPLING, "the mark comes off without a trace");
  assert.deepEqual(result, RESULT, "a response is passed as it came");
});

Deno.test("Only this relay's nonce key is a mark: a key the upstream wrote names nothing", () => {
  const forged = { ...SAMPLING, params: { _meta: { [streamMarkKey()]: "a33-9" } } };
  assert.equal(takeStreamMark(structuredClone(forged), KEY), undefined);
});

Deno.test("GET streams and JSON answers are passed through unmarked", async () => {
  const get = await marked(sse(`data: ${JSON.stringify(SAMPLING)}\n\n`), CALL, "GET");
  assert.equal(get, `data: ${JSON.stringify(SAMPLING)}\n\n`);
  const json = await marked(
    new Response(JSON.stringify(RESULT), { headers: { "content-type": "application/json" } }),
    CALL,
  );
  assert.equal(json, JSON.stringify(RESULT));
});
