// The SDK's export map gives no types for "server/index.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/server/index"
export * from "mcp-sdk-npm/server/index.js";
