// The SDK's export map gives no types for "client/stdio.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/client/stdio"
export * from "mcp-sdk-npm/client/stdio.js";
