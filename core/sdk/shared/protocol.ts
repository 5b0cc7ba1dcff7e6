// The SDK's export map gives no types for "shared/protocol.js" under Deno; this shim pairs runtime and types.
// @ts-types="mcp-sdk-npm/shared/protocol"
export * from "mcp-sdk-npm/shared/protocol.js";
