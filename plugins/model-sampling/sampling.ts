/**
 * Maps the engine's conversation to MCP `sampling/createMessage` (with tools, spec 2025-11-25)
 * and back.
 * @module
 */
import type { ChatMessage, ModelRequest, ModelResponse } from "../../core/plugin_api/mod.ts";

/** The createMessage params for a request. */
export function samplingParams(request: ModelRequest): Record<string, unknown> {
  return {
    systemPrompt: request.system,
    maxTokens: request.maxTokens,
    messages: request.messages.map(toSamplingMessage),
    ...(request.tools.length === 0 ? {} : {
      tools: request.tools.map((t) => ({
        name: t.name,
        ...(t.description === undefined ? {} : { description: t.description }),
        inputSchema: t.inputSchema,
      })),
      toolChoice: { mode: "auto" },
    }),
    ...(request.model === undefined
      ? {}
      : { modelPreferences: { hints: [{ name: request.model }] } }),
  };
}

function toSamplingMessage(m: ChatMessage): Record<string, unknown> {
  if (m.role === "tool") {
    return {
      role: "user",
      content: [{
        type: "tool_result",
        toolUseId: m.toolCallId ?? "",
        content: [{ type: "text", text: m.content }],
      }],
    };
  }
  if (m.role === "assistant" && m.toolCalls?.length) {
    return {
      role: "assistant",
      content: [
        ...(m.content ? [{ type: "text", text: m.content }] : []),
        ...m.toolCalls.map((c) => ({
          type: "tool_use",
          id: c.id,
          name: c.name,
          input: c.arguments,
        })),
      ],
    };
  }
  return { role: m.role, content: { type: "text", text: m.content } };
}

/** The engine's response from a createMessage result. */
export function fromSamplingResult(result: Record<string, unknown>): ModelResponse {
  const raw = result.content;
  const blocks = (Array.isArray(raw) ? raw : [raw]) as Record<string, unknown>[];
  const text = blocks.filter((b) => b?.type === "text").map((b) => String(b.text)).join("\n");
  const toolCalls = blocks.filter((b) => b?.type === "tool_use").map((b) => ({
    id: String(b.id),
    name: String(b.name),
    arguments: (b.input ?? {}) as Record<string, unknown>,
  }));
  return { text, toolCalls };
}
