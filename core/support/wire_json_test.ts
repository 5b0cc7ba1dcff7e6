import assert from "node:assert/strict";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { serializeMessage, toolPage } from "./wire_json.ts";

const tool = (name: string) => ({
  name,
  description: `The "${name}" tool — quotes, unicode ✓ and \n newlines survive`,
  inputSchema: { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
});

Deno.test("A tool page serializes to exactly what JSON.stringify writes for the same message", () => {
  const tools = [tool("a"), tool("b"), tool("c")];
  for (const page of [{ tools }, { tools, nextCursor: "eyJvIjozfQ" }, { tools: [] }]) {
    for (const id of [1, "x-1"]) {
      const message = { jsonrpc: "2.0", id, result: toolPage({ ...page }) } as JSONRPCMessage;
      assert.equal(serializeMessage(message), JSON.stringify(message));
    }
  }
});

Deno.test("A descriptor is serialized once, however many pages carry it", () => {
  let reads = 0;
  const counted = tool("counted");
  Object.defineProperty(counted, "title", {
    enumerable: true,
    get: () => (reads++, "Counted"),
  });
  const pages = [toolPage({ tools: [counted] }), toolPage({ tools: [tool("x"), counted] })];
  const texts = pages.map((result, id) => serializeMessage({ jsonrpc: "2.0", id, result }));
  assert.equal(reads, 1);
  assert.deepEqual(JSON.parse(texts[1]!).result.tools[1], JSON.parse(JSON.stringify(counted)));
});

Deno.test("A page's members other than tools are written, and undefined ones left out as JSON does", () => {
  const result = toolPage({ tools: [tool("a")], nextCursor: undefined, _meta: { k: 1 } });
  const text = serializeMessage({ jsonrpc: "2.0", id: 7, result });
  assert.deepEqual(JSON.parse(text), {
    jsonrpc: "2.0",
    id: 7,
    result: JSON.parse(JSON.stringify(result)),
  });
});

Deno.test("Every other message is written by JSON.stringify", () => {
  const unmarked = { tools: [tool("a")] };
  const messages = [
    { jsonrpc: "2.0", id: 1, result: unmarked },
    { jsonrpc: "2.0", method: "notifications/tools/list_changed" },
    { jsonrpc: "2.0", id: 2, error: { code: -32601, message: "Method not found" } },
  ] as JSONRPCMessage[];
  for (const message of messages) assert.equal(serializeMessage(message), JSON.stringify(message));
});
