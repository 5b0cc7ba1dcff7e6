/**
 * `scripted`: a deterministic model for tests and demos, answering from a script file
 * (`MCP_PLUGIN_MODEL_SCRIPTED_SCRIPT`, YAML or JSON), re-read on every call so edits apply at once.
 * @module
 */
import { definePlugin, type ModelProvider } from "../../core/plugin_api/mod.ts";
import { answer, parseScript } from "./script.ts";

export default definePlugin({
  name: "model-scripted",
  version: "1.0.0",
  kind: "model",
  description: "Deterministic model answering from a script of canned turns",
  permissions: { read: true },
  create(ctx): ModelProvider {
    const path = typeof ctx.config.script === "string" ? ctx.config.script : undefined;
    return {
      name: "scripted",
      async complete(request) {
        if (path === undefined) {
          return {
            text: "The scripted model has no script; set MCP_PLUGIN_MODEL_SCRIPTED_SCRIPT to a " +
              "YAML list of { text, tool_calls }",
            toolCalls: [],
          };
        }
        return answer(parseScript(await Deno.readTextFile(path), path), request);
      },
    };
  },
});
