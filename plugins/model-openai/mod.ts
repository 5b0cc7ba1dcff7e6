/**
 * `openai`: any OpenAI-compatible chat-completions endpoint with tool calling (OpenAI, Azure,
 * vLLM, Ollama, LM Studio). Config: `MCP_PLUGIN_MODEL_OPENAI_BASE_URL` (default
 * https://api.openai.com/v1), `MCP_PLUGIN_MODEL_OPENAI_API_KEY`, `MCP_PLUGIN_MODEL_OPENAI_MODEL`.
 * @module
 */
import { definePlugin, GatewayError, type ModelProvider } from "../../core/plugin_api/mod.ts";
import { chatBody, fromCompletion } from "./chat_completions.ts";

export default definePlugin({
  name: "model-openai",
  version: "1.0.0",
  kind: "model",
  description: "OpenAI-compatible chat completions with tool calling",
  permissions: { net: true },
  create(ctx): ModelProvider {
    const base = String(ctx.config.base_url ?? "https://api.openai.com/v1").replace(/\/+$/, "");
    const key = typeof ctx.config.api_key === "string" ? ctx.config.api_key : undefined;
    const fallbackModel = String(ctx.config.model ?? "gpt-4o-mini");
    return {
      name: "openai",
      async complete(request) {
        const response = await fetch(`${base}/chat/completions`, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            ...(key === undefined ? {} : { Authorization: `Bearer ${key}` }),
          },
          body: JSON.stringify(chatBody(request, request.model ?? fallbackModel)),
          signal: request.signal,
        });
        const text = await response.text();
        if (!response.ok) {
          throw new GatewayError(
            "upstream_error",
            `The model endpoint ${base}/chat/completions answered ${response.status}: ` +
              `${text.slice(0, 500)}; check MCP_PLUGIN_MODEL_OPENAI_BASE_URL and _API_KEY`,
          );
        }
        try {
          return fromCompletion(JSON.parse(text));
        } catch (error) {
          throw new GatewayError(
            "upstream_error",
            `The model endpoint ${base} did not answer a chat completion (${error})`,
          );
        }
      },
    };
  },
});
