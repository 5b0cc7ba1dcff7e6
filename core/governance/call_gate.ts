/**
 * The gate as the bridge uses it: check a call, ask the client's user for approval in-band when
 * the client supports elicitation, and turn a refusal into the MCP error the client receives.
 * @module
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  ElicitResultSchema,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../errors.ts";
import type { ApprovalQueue } from "./approval_queue.ts";
import {
  APPROVAL_TOKEN_META_KEY,
  type CallContext,
  type ToolGovernance,
  type ToolTarget,
  type Verdict,
} from "./tool_governance.ts";

/** What the gate needs from the inbound session. */
export interface GateSession {
  server: Server;
  extra: RequestHandlerExtra<ServerRequest, ServerNotification>;
  /** Ask through elicitation/create when the client supports it. */
  inBand: boolean;
}

/** Checks a call; resolves when it may proceed, throws the client's error otherwise. */
export async function gateCall(
  governance: ToolGovernance,
  approvals: ApprovalQueue,
  ctx: CallContext,
  target: ToolTarget,
  args: Record<string, unknown>,
  meta: Record<string, unknown> | undefined,
  session: GateSession,
): Promise<Verdict & { action: "allow" }> {
  const token = meta?.[APPROVAL_TOKEN_META_KEY];
  let verdict = await governance.check(ctx, target, args, {
    ...(typeof token === "string" ? { approvalToken: token } : {}),
  });
  if (
    verdict.action === "approval_required" && session.inBand &&
    session.server.getClientCapabilities()?.elicitation
  ) {
    verdict = await approveInBand(governance, approvals, ctx, target, args, verdict, session);
  }
  if (verdict.action === "allow") return verdict;
  if (verdict.action === "deny") {
    throw new GatewayError(verdict.code as never, verdict.reason, {
      tool: target.name,
      tenant: ctx.tenant,
      ...(verdict.effect ? { effect: verdict.effect } : {}),
      ...(verdict.rule ? { rule: verdict.rule } : {}),
      ...(verdict.retryAfterMs === undefined ? {} : { retryAfterMs: verdict.retryAfterMs }),
    }).toMcpError();
  }
  const { request } = verdict;
  throw new GatewayError(
    "approval_required",
    `${verdict.reason}. Approval request ${request.id}: an operator approves it with ` +
      `POST /v1/approvals/${request.id}/approve; then retry the same call with the token in ` +
      `_meta["${APPROVAL_TOKEN_META_KEY}"] (GET /v1/approvals/${request.id} returns it to you once approved)`,
    { request, tokenMetaKey: APPROVAL_TOKEN_META_KEY },
  ).toMcpError();
}

async function approveInBand(
  governance: ToolGovernance,
  approvals: ApprovalQueue,
  ctx: CallContext,
  target: ToolTarget,
  args: Record<string, unknown>,
  verdict: Verdict & { action: "approval_required" },
  session: GateSession,
): Promise<Verdict> {
  const { request } = verdict;
  let answer;
  try {
    answer = await session.extra.sendRequest(
      {
        method: "elicitation/create",
        params: {
          message: `Approve a ${verdict.effect} call? Tool "${target.name}" with arguments ` +
            `${JSON.stringify(args).slice(0, 2_000)} (approval request ${request.id}).`,
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
      { signal: session.extra.signal },
    );
  } catch {
    // The client could not ask: leave the request for an operator.
    return verdict;
  }
  const by = `elicitation:${ctx.subject}`;
  if (answer.action !== "accept" || answer.content?.approve !== true) {
    await approvals.deny(request.id, by, `declined in the client (${answer.action})`, {
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
  return await governance.check(ctx, target, args, { approvalToken: token });
}
