// The SDK's export map gives no types for "server/webStandardStreamableHttp.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/server/webStandardStreamableHttp"
export * from "mcp-sdk-npm/server/webStandardStreamableHttp.js";
