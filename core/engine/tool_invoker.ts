/**
 * The one way the engine calls a tool: through governance, for the caller's tenant. The kernel
 * provides it (native tools and proxied ones alike), so the engine never imports the bridge.
 * @module
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { ApprovalSummary } from "../governance/tool_governance.ts";
import type { ToolCallContext } from "../plugin_api/mod.ts";

/** One governed call. */
export interface InvokeRequest {
  /** The tool's name as a client would call it (`<server>__<tool>` for proxied tools). */
  name: string;
  args: Record<string, unknown>;
  /** The inbound call this one is made on behalf of: its caller, signal and sampling. */
  context: ToolCallContext;
  /** The agent making the call, recorded in the audit line. */
  agent?: string;
  /** The workflow step making the call, recorded on its span. */
  step?: string;
  /** An approval token; used only by a call that needs approval. */
  approvalToken?: string;
}

/** How a governed call ended; never thrown, so runs can decide per step. */
export type InvokeOutcome =
  | { status: "ok"; result: CallToolResult }
  | { status: "denied"; code: string; reason: string }
  | { status: "approval_required"; reason: string; request: ApprovalSummary }
  | { status: "error"; code: string; reason: string };

/** Calls tools with governance applied. */
export interface ToolInvoker {
  /** Checks the call for the context's tenant, then runs it. */
  invoke(request: InvokeRequest): Promise<InvokeOutcome>;
  /** Every tool a caller could name (governance still decides each call). */
  tools(): Tool[];
}

/** The text content of a result, joined. */
export function resultText(result: CallToolResult): string {
  return result.content
    .map((c) => (c.type === "text" ? c.text : `[${c.type}]`))
    .join("\n");
}
