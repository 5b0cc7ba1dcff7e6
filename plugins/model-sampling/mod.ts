/**
 * `sampling`: the agent thinks with the calling client's own model, through MCP
 * `sampling/createMessage` on the inbound session (no API key in the gateway).
 * @module
 */
import { definePlugin, GatewayError, type ModelProvider } from "../../core/plugin_api/mod.ts";
import { fromSamplingResult, samplingParams } from "./sampling.ts";

export default definePlugin({
  name: "model-sampling",
  version: "1.0.0",
  kind: "model",
  description: "Uses the inbound MCP client's model via sampling/createMessage",
  permissions: {},
  create(): ModelProvider {
    return {
      name: "sampling",
      async complete(request) {
        if (!request.sample) {
          throw new GatewayError(
            "invalid_arguments",
            'The "sampling" model needs a client that declares the sampling capability; ' +
              "connect with one, or give the agent another model (model: openai:… or scripted)",
          );
        }
        return fromSamplingResult(await request.sample(samplingParams(request), request.signal));
      },
    };
  },
});
