// The SDK's export map gives no types for "types.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/types"
export * from "mcp-sdk-npm/types.js";
