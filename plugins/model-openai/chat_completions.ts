/**
 * Maps the engine's conversation to an OpenAI-compatible `/chat/completions` request with tool
 * calling, and the response back.
 * @module
 */
import type { ChatMessage, ModelRequest, ModelResponse } from "../../core/plugin_api/mod.ts";

/** The request body. */
export function chatBody(request: ModelRequest, model: string): Record<string, unknown> {
  return {
    model,
    max_tokens: request.maxTokens,
    messages: [{ role: "system", content: request.system }, ...request.messages.map(toMessage)],
    ...(request.tools.length === 0 ? {} : {
      tools: request.tools.map((t) => ({
        type: "function",
        function: {
          name: t.name,
          ...(t.description === undefined ? {} : { description: t.description }),
          parameters: t.inputSchema,
        },
      })),
    }),
  };
}

function toMessage(m: ChatMessage): Record<string, unknown> {
  if (m.role === "tool") return { role: "tool", tool_call_id: m.toolCallId, content: m.content };
  if (m.role === "assistant" && m.toolCalls?.length) {
    return {
      role: "assistant",
      content: m.content || null,
      tool_calls: m.toolCalls.map((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.name, arguments: JSON.stringify(c.arguments) },
      })),
    };
  }
  return { role: m.role, content: m.content };
}

/** The engine's response from the first choice; throws when the body is not a completion. */
export function fromCompletion(body: unknown): ModelResponse {
  const message = (body as { choices?: { message?: Record<string, unknown> }[] })?.choices?.[0]
    ?.message;
  if (!message) throw new Error("the response has no choices[0].message");
  const calls = (message.tool_calls ?? []) as {
    id: string;
    function: { name: string; arguments?: string };
  }[];
  return {
    text: typeof message.content === "string" ? message.content : "",
    toolCalls: calls.map((c) => ({
      id: c.id,
      name: c.function.name,
      arguments: parseArguments(c.function.arguments),
    })),
  };
}

function parseArguments(text: string | undefined): Record<string, unknown> {
  if (!text) return {};
  try {
    const value = JSON.parse(text);
    return typeof value === "object" && value !== null ? value : {};
  } catch {
    // Models sometimes emit broken JSON; the tool's schema check will say what is missing.
    return {};
  }
}
