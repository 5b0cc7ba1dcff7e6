// The SDK's export map gives no types for "server/mcp.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/server/mcp"
export * from "mcp-sdk-npm/server/mcp.js";
