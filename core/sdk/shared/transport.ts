// The SDK's export map gives no types for "shared/transport.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/shared/transport"
export * from "mcp-sdk-npm/shared/transport.js";
