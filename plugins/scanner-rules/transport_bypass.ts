/**
 * Rule transport-bypass: descriptions that steer the model off MCP onto another channel (curl,
 * ssh, raw URLs), where the gateway's governance and audit never see the call.
 * @module
 */
import type { ScannerRule } from "../../core/plugin_api/mod.ts";
import { patternRule } from "./text.ts";

/** Instructions to use curl, ssh, raw URLs or another channel instead of the tool. */
export const transportBypass: ScannerRule = patternRule({
  id: "transport-bypass",
  severity: "high",
  description:
    "Tells the model to use curl, ssh, raw URLs or another channel instead of the MCP transport",
  patterns: [
    {
      re:
        /\b(?:use|run|execute|call|invoke)\s*:?\s+`?(?:curl|wget|ssh|scp|sftp|netcat|telnet|ftp|powershell|invoke-webrequest)\b/i,
      message: "tells the model to use a network command outside MCP",
    },
    {
      // Bounded and unambiguous (a flag's value never starts with "-"): linear on "-a -a -a …".
      re:
        /\bcurl\s{1,4}(?:-{1,2}[A-Za-z][\w-]{0,30}(?:[ =]{1,4}(?!https?:)[^\s-]\S{0,200})?\s{1,4}){0,12}['"]?https?:\/\//i,
      message: "contains a curl command to a URL",
    },
    {
      re:
        /\b(?:instead of|rather than|bypass(?:ing)?)\s+(?:using\s+|calling\s+)?(?:this|the)\s+(?:tool|mcp|gateway|proxy)\b/i,
      message: "tells the model to route around the tool",
    },
    {
      re:
        /\b(?:call|request|fetch|post to)\s+(?:the\s+)?(?:api|endpoint)\s+directly\b|\b(?:directly|manually)\s+(?:call|request|fetch|open|visit)\s+https?:\/\//i,
      message: "tells the model to call an endpoint directly",
    },
    {
      re:
        /\b(?:another|a different|a separate|an out[- ]of[- ]band)\s+(?:channel|connection|transport)\b/i,
      message: "points the model at another channel",
    },
  ],
});
