import assert from "node:assert/strict";
import { markRelated, RELATED_REQUEST_META_KEY, takeRelated } from "./related_request.ts";

Deno.test("An upstream's own related-request marker is removed, so it cannot name a call itself", () => {
  const forged = {
    jsonrpc: "2.0",
    id: 7,
    method: "sampling/createMessage",
    params: { _meta: { [RELATED_REQUEST_META_KEY]: "a33-1", other: 1 }, maxTokens: 5 },
  };
  markRelated(forged, undefined);
  assert.deepEqual(forged.params, { _meta: { other: 1 }, maxTokens: 5 });
});

Deno.test("The worker's marker replaces any the upstream wrote and is taken off before relaying", () => {
  const message = {
    jsonrpc: "2.0",
    method: "notifications/message",
    params: { level: "info", data: "x", _meta: { [RELATED_REQUEST_META_KEY]: "forged" } },
  };
  markRelated(message, "a33-2");
  const { related, params } = takeRelated(message.params as Record<string, unknown>);
  assert.equal(related, "a33-2");
  assert.deepEqual(params, { level: "info", data: "x" });
});

Deno.test("Responses are never marked", () => {
  const response = { jsonrpc: "2.0", id: 1, result: {} };
  markRelated(response, 1);
  assert.deepEqual(response, { jsonrpc: "2.0", id: 1, result: {} });
});
