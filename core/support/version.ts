/** The gateway's name and version, as announced in `serverInfo`. */
export const GATEWAY_INFO = { name: "agent33-mcp-gateway", version: "0.1.0" } as const;
