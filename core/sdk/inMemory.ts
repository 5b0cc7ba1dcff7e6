// The SDK's export map gives no types for "inMemory.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/inMemory"
export * from "mcp-sdk-npm/inMemory.js";
