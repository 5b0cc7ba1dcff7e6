/**
 * The kernel's own native tools.
 * @module
 */
import type { MCPServiceBridge } from "./bridge.ts";
import type { NativeTool } from "../plugin_api/mod.ts";

/** `system_status`: counts of agents, tools, skills, workflows, proxies and sessions. */
export function systemStatusTool(bridge: MCPServiceBridge): NativeTool {
  return {
    name: "system_status",
    title: "System status",
    description:
      "Counts of the agents, tools, skills, workflows, upstream proxies and live sessions this gateway serves",
    inputSchema: { type: "object", properties: {}, additionalProperties: false },
    outputSchema: {
      type: "object",
      properties: {
        gateway: { type: "object" },
        agents: { type: "integer" },
        tools: { type: "integer" },
        skills: { type: "integer" },
        workflows: { type: "integer" },
        proxies: { type: "integer" },
        sessions: { type: "integer" },
      },
      required: ["agents", "tools", "skills", "workflows", "proxies", "sessions"],
    },
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    handler() {
      const status = bridge.status();
      return Promise.resolve({
        content: [{ type: "text", text: JSON.stringify(status) }],
        structuredContent: { ...status },
      });
    },
  };
}
