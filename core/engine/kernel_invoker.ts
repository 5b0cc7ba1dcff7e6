/**
 * The kernel's {@link ToolInvoker}: native tools from the tool registry, proxied tools through the
 * aggregated catalog, each after `ToolGovernance.check` with the same target the bridge builds
 * (name, upstream server for the connector boundary, descriptor for effect class and schema).
 * @module
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { serializeError } from "../errors.ts";
import type { CallContext, ToolGovernance, ToolTarget } from "../governance/tool_governance.ts";
import type { ProxyManager } from "../proxy/proxy_manager.ts";
import type { ToolRegistry } from "../tool_registry.ts";
import type { InvokeOutcome, InvokeRequest, ToolInvoker } from "./tool_invoker.ts";

/** What the kernel invoker reads. */
export interface KernelInvokerOptions {
  tools: ToolRegistry;
  proxy: ProxyManager;
  governance: ToolGovernance;
}

/** Builds the invoker the engine uses inside the gateway. */
export function kernelInvoker(options: KernelInvokerOptions): ToolInvoker {
  const { tools, proxy, governance } = options;
  return {
    tools(): Tool[] {
      return [...tools.list(), ...proxy.aggregated.tools()];
    },
    async invoke(request: InvokeRequest): Promise<InvokeOutcome> {
      const { name, args, context } = request;
      const caller: CallContext = {
        tenant: context.auth.tenant,
        subject: context.auth.subject,
        scopes: context.auth.scopes,
        ...(request.agent === undefined ? {} : { agent: request.agent }),
      };
      const native = tools.get(name);
      const route = native ? undefined : proxy.aggregated.resolveTool(name);
      if (!native && !route) {
        return {
          status: "error",
          code: "unknown_tool",
          reason: `Unknown tool "${name}"; call tools/list for the names`,
        };
      }
      if (route) {
        const quarantine = proxy.quarantineReason(route.handle.id, route.original);
        if (quarantine) {
          return {
            status: "denied",
            code: "quarantined",
            reason: `Tool "${name}" is quarantined by the scanner: ${quarantine}`,
          };
        }
      }
      const descriptor = native ??
        route!.tool ?? route!.handle.catalog.tools.find((t) => t.name === route!.original);
      const target: ToolTarget = {
        name,
        ...(route ? { server: route.handle.id } : {}),
        ...(descriptor ? { descriptor } : {}),
      };
      // A token is offered only to a call that needs one: a dry run asks first, so an unrelated
      // call never consumes (or is refused for) a token meant for another.
      let token: string | undefined;
      if (request.approvalToken !== undefined) {
        const dry = await governance.check(caller, target, args, { dryRun: true });
        if (dry.action === "approval_required") token = request.approvalToken;
      }
      const verdict = await governance.check(
        caller,
        target,
        args,
        token === undefined ? {} : { approvalToken: token },
      );
      if (verdict.action === "deny") {
        return { status: "denied", code: verdict.code, reason: verdict.reason };
      }
      if (verdict.action === "approval_required") {
        return { status: "approval_required", reason: verdict.reason, request: verdict.request };
      }
      try {
        const result = native
          ? await native.handler(args, context)
          : await route!.handle.callTool(route!.original, args, { signal: context.signal });
        return { status: "ok", result };
      } catch (error) {
        const e = serializeError(error);
        return { status: "error", code: e.code, reason: e.message };
      }
    },
  };
}
