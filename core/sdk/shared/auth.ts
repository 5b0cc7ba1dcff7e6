// The SDK's export map gives no types for "shared/auth.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/shared/auth"
export * from "mcp-sdk-npm/shared/auth.js";
