import assert from "node:assert/strict";
import plugin from "./mod.ts";
import type { ModelProvider, PluginContext } from "../../core/plugin_api/mod.ts";

// A chat-completions response with a tool call, in the shape OpenAI returns it.
const TOOL_CALL_RESPONSE = {
  id: "chatcmpl-1",
  object: "chat.completion",
  choices: [{
    index: 0,
    finish_reason: "tool_calls",
    message: {
      role: "assistant",
      content: null,
      tool_calls: [{
        id: "call_abc",
        type: "function",
        function: { name: "memory__read_graph", arguments: '{"depth":1}' },
      }],
    },
  }],
};

Deno.test("the openai provider sends tools and reads tool calls back", async () => {
  const seen: Record<string, unknown>[] = [];
  const server = Deno.serve({ port: 0, onListen: () => {} }, async (request) => {
    assert.equal(request.headers.get("authorization"), "Bearer k");
    seen.push(await request.json());
    return Response.json(TOOL_CALL_RESPONSE);
  });
  try {
    const provider = plugin.create({
      config: { base_url: `http://127.0.0.1:${server.addr.port}/v1`, api_key: "k" },
    } as unknown as PluginContext) as ModelProvider;
    const response = await provider.complete({
      model: "gpt-test",
      system: "sys",
      messages: [{ role: "user", content: "hi" }],
      tools: [{ name: "memory__read_graph", inputSchema: { type: "object" } }],
      maxTokens: 10,
      signal: new AbortController().signal,
    });
    assert.deepEqual(response, {
      text: "",
      toolCalls: [{ id: "call_abc", name: "memory__read_graph", arguments: { depth: 1 } }],
    });
    const body = seen[0] as { model: string; messages: { role: string }[]; tools: unknown[] };
    assert.equal(body.model, "gpt-test");
    assert.deepEqual(body.messages.map((m) => m.role), ["system", "user"]);
    assert.equal(body.tools.length, 1);
  } finally {
    await server.shutdown();
  }
});
