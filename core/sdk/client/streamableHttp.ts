// The SDK's export map gives no types for "client/streamableHttp.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/client/streamableHttp"
export * from "mcp-sdk-npm/client/streamableHttp.js";
