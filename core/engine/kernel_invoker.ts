/**
 * The kernel's {@link ToolInvoker}: the engine's calls (agents, workflows) go through the same
 * {@link CallPipeline} as a client's — resolve, quarantine, scanner escalation, governance,
 * approval token, breaker, forward — so an agent gets exactly the refusals a client gets.
 * @module
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { type CallPipeline, REFUSAL_CODES } from "../mcp/call_pipeline.ts";
import { GatewayError, serializeError } from "../support/errors.ts";
import type { ApprovalSummary, CallContext } from "../governance/tool_governance.ts";
import type { ProxyManager } from "../proxy/proxy_manager.ts";
import type { ToolRegistry } from "../mcp/tool_registry.ts";
import type { InvokeOutcome, InvokeRequest, ToolInvoker } from "./tool_invoker.ts";

/** What the kernel invoker reads. */
export interface KernelInvokerOptions {
  pipeline: CallPipeline;
  tools: ToolRegistry;
  proxy: ProxyManager;
}

/** Builds the invoker the engine uses inside the gateway. */
export function kernelInvoker(options: KernelInvokerOptions): ToolInvoker {
  const { pipeline, tools, proxy } = options;
  return {
    tools(): Tool[] {
      return [...tools.list(), ...proxy.aggregated.tools()];
    },
    async invoke(request: InvokeRequest): Promise<InvokeOutcome> {
      const { name, args } = request;
      // Traced (the inbound call has a span): this call is a child span, and its stages its own.
      // Named in two parts and its attributes set one by one: no string or object built for it.
      const span = request.context.span?.child("tools/call", undefined, "internal", name);
      span?.set("mcp.method.name", "tools/call");
      span?.set("gen_ai.tool.name", name);
      span?.set("agent33.workflow.step", request.step);
      span?.set("agent33.agent", request.agent);
      const context = span === undefined ? request.context : { ...request.context, span };
      const caller: CallContext = {
        tenant: context.auth.tenant,
        subject: context.auth.subject,
        principal: context.auth.principal,
        scopes: context.auth.scopes,
        ...(request.agent === undefined ? {} : { agent: request.agent }),
      };
      try {
        const result = await pipeline.call({
          caller,
          name,
          args,
          scope: { view: proxy.aggregated, native: true },
          ...(span === undefined ? {} : { span }),
          ...(request.approvalToken === undefined ? {} : { approvalToken: request.approvalToken }),
          runNative: (tool) => tool.handler(args, context),
          // The caller's tenant picks its own instance of a `scope: tenant` upstream.
          upstream: () => ({ signal: context.signal, tenant: caller.tenant }),
        });
        if (result.isError) span?.fail("tool_error", "the tool returned isError: true");
        span?.set("agent33.outcome", result.isError ? "tool_error" : "ok");
        return { status: "ok", result };
      } catch (error) {
        const e = serializeError(error);
        if (span) {
          span.set("agent33.outcome", REFUSAL_CODES.has(e.code) ? "denied" : "error");
          span.fail(e.code, e.message);
        }
        if (error instanceof GatewayError && e.code === "approval_required") {
          const request = (error.data as { request: ApprovalSummary }).request;
          return { status: "approval_required", reason: e.message, request };
        }
        if (REFUSAL_CODES.has(e.code)) return { status: "denied", code: e.code, reason: e.message };
        return { status: "error", code: e.code, reason: e.message };
      } finally {
        span?.end();
      }
    },
  };
}
