/**
 * In-band approval: the calling client's user approves a call through `elicitation/create`,
 * instead of an operator through the approvals API. Who may do this is the call pipeline's
 * {@link inBandAllowed} (stdio by default; HTTP only for tenants with `approval: in_band`).
 * @module
 */
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  ElicitResultSchema,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import type { ApprovalQueue } from "./approval_queue.ts";
import type { CallContext, ToolGovernance, ToolTarget, Verdict } from "./tool_governance.ts";

/**
 * Asks the client's user to approve `verdict`'s request; on yes, approves it (as
 * `elicitation:<subject>`) and re-checks the call with the new token (redeemed when the call is
 * sent). A client that cannot ask leaves the request for an operator; a no denies it.
 */
export async function approveInBand(
  governance: ToolGovernance,
  approvals: ApprovalQueue,
  ctx: CallContext,
  target: ToolTarget,
  args: Record<string, unknown>,
  verdict: Verdict & { action: "approval_required" },
  extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
): Promise<Verdict> {
  const { request } = verdict;
  let answer;
  try {
    answer = await extra.sendRequest(
      {
        method: "elicitation/create",
        params: {
          message: `Approve a ${verdict.effect} call? Tool "${target.name}" with arguments ` +
            `${JSON.stringify(args).slice(0, 2_000)} (approval request ${request.id}; ` +
            `${verdict.reason}).`,
          requestedSchema: {
            type: "object",
            properties: {
              approve: {
                type: "boolean",
                title: "Approve",
                description: `Allow this ${verdict.effect} call to ${target.name}`,
              },
            },
            required: ["approve"],
          },
        },
      },
      ElicitResultSchema,
      { signal: extra.signal },
    );
  } catch {
    // The client could not ask: leave the request for an operator.
    return verdict;
  }
  // Exempt from requester ≠ approver (the caller's own user answers): the principal is only kept.
  const by = {
    subject: `elicitation:${ctx.subject}`,
    principal: ctx.principal ?? "",
    // The caller's user decides the caller's own request, in its own tenant only.
    tenant: ctx.tenant,
    scopes: [],
  };
  if (answer.action !== "accept" || answer.content?.approve !== true) {
    await approvals.reject(request.id, by, `declined in the client (${answer.action})`, {
      inBand: true,
    });
    return {
      action: "deny",
      code: "approval_denied",
      reason: `The ${verdict.effect} call to "${target.name}" was not approved (${answer.action})`,
      effect: verdict.effect,
      rule: "in-band approval",
    };
  }
  const { token } = await approvals.approve(request.id, by, { inBand: true });
  return await governance.check(ctx, target, args, { approvalToken: token, deferRedeem: true });
}
