// The SDK's export map gives no types for "client/index.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/client/index"
export * from "mcp-sdk-npm/client/index.js";
