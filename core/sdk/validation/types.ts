// The SDK's export map gives no types for "validation/types.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/validation/types"
export * from "mcp-sdk-npm/validation/types.js";
