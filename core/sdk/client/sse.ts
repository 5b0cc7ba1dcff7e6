// The SDK's export map gives no types for "client/sse.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/client/sse"
export * from "mcp-sdk-npm/client/sse.js";
