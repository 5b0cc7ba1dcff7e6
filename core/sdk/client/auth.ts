// The SDK's export map gives no types for "client/auth.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/client/auth"
export * from "mcp-sdk-npm/client/auth.js";
