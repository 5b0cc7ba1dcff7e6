/**
 * `/v1/approvals`: pending approvals for operators, and their tokens for the callers that asked.
 *
 * - `GET /v1/approvals[?status=pending]` (admin, approver, operator): requests with their
 *   arguments; an approver or operator without `all_tenants` sees its own tenant's only, and
 *   another tenant's request answers 404 to it, as an unknown id does.
 * - `GET /v1/approvals/{id}`: approvers and operators see the request; the caller that made it
 *   sees its status and, once approved, its token.
 * - `POST /v1/approvals/{id}/approve` (admin, approver): issues the token.
 * - `POST /v1/approvals/{id}/deny` (admin, approver), optional body `{ "reason": "…" }`.
 *
 * The requester of an approval can never decide it (the queue refuses with `self_approval`).
 * Shared by replicas (cluster mode), a decision another replica made first answers 409
 * `approval_not_pending`, and an unreachable shared bucket 503 `internal`.
 * @module
 */
import { coversTenant, hasScope, sameCaller } from "../auth/token_payload.ts";
import { GatewayError } from "../support/errors.ts";
import type { ApprovalQueue, ApprovalStatus } from "../governance/approval_queue.ts";
import { APPROVAL_TOKEN_META_KEY } from "../governance/tool_governance.ts";
import { jsonError } from "../http/http_listener.ts";
import { refuseScope } from "./admin_scope.ts";
import type { HttpRoute } from "../http/http_route.ts";

const STATUSES: readonly ApprovalStatus[] = ["pending", "approved", "denied", "expired"];
/** Longest denial reason accepted. */
const MAX_REASON = 2000;

/** The approvals routes over a queue. */
export function approvalRoutes(queue: ApprovalQueue): HttpRoute {
  return {
    path: "/v1/approvals",
    prefix: true,
    methods: ["GET", "POST"],
    async handle(request, auth) {
      const url = new URL(request.url);
      const [id, action, ...rest] = url.pathname.slice("/v1/approvals".length).split("/").filter(
        Boolean,
      );
      // Who may see every request: whoever may decide them, and operators.
      const overseer = hasScope(auth, "admin", "approver", "operator");
      try {
        if (id === undefined) {
          if (request.method !== "GET") return notAllowed("GET");
          if (!overseer) {
            return refuseScope(auth, "approve", "listing approval requests") ??
              jsonError(403, "forbidden", "Listing approval requests needs scope approver");
          }
          const status = url.searchParams.get("status");
          if (status !== null && !STATUSES.includes(status as ApprovalStatus)) {
            return jsonError(
              400,
              "invalid_request",
              `status must be one of ${STATUSES.join(", ")}`,
            );
          }
          const listed = queue.list(status === null ? {} : { status: status as ApprovalStatus });
          return Response.json({
            approvals: listed.filter((request) => coversTenant(auth, request.tenant)),
          });
        }
        if (rest.length > 0) {
          return jsonError(404, "not_found", `Nothing is served at ${url.pathname}`);
        }
        if (action === undefined) {
          if (request.method !== "GET") return notAllowed("GET");
          // Shared by replicas: another one may have filed or decided it a moment ago.
          await queue.refresh(id);
          const found = queue.get(id);
          // The caller that made the request (whatever else it may do): its status, and its
          // token once approved.
          if (found && sameCaller(found, auth)) {
            const view = overseer ? found : { id, status: found.status };
            if (found.status !== "approved") return Response.json(view);
            const { token, expiresAt } = queue.tokenFor(id, auth);
            return Response.json({
              ...view,
              token,
              expiresAt,
              metaKey: APPROVAL_TOKEN_META_KEY,
            });
          }
          if (!found || !overseer || !coversTenant(auth, found.tenant)) return unknown(id);
          return Response.json(found);
        }
        if (request.method !== "POST") return notAllowed("POST");
        const refused = refuseScope(auth, "approve", `POST ${url.pathname}`);
        if (refused) return refused;
        if (action === "approve") {
          const { token, expiresAt } = await queue.approve(id, auth);
          return Response.json({
            id,
            status: "approved",
            token,
            expiresAt,
            usage:
              `Retry the same call with _meta["${APPROVAL_TOKEN_META_KEY}"] set to this token; it works once.`,
          });
        }
        if (action === "deny") {
          const body = await request.json().catch(() => ({})) as { reason?: unknown } | null;
          const reason = body?.reason;
          // The reason is kept with the request (and on disk) and told to the caller: bounded.
          if (reason !== undefined && (typeof reason !== "string" || reason.length > MAX_REASON)) {
            return jsonError(
              400,
              "invalid_request",
              `reason must be a string of at most ${MAX_REASON} characters, e.g. {"reason": "not during the freeze"}`,
            );
          }
          return Response.json(await queue.reject(id, auth, reason));
        }
        return jsonError(404, "not_found", `Unknown action "${action}"; use /approve or /deny`);
      } catch (error) {
        if (error instanceof GatewayError) {
          const status = error.code === "not_found"
            ? 404
            : error.code === "self_approval"
            ? 403
            : error.code === "internal"
            ? 503
            : 409;
          return jsonError(status, error.code, error.message);
        }
        throw error;
      }
    },
  };
}

function unknown(id: string): Response {
  return jsonError(
    404,
    "not_found",
    `No approval request "${id}"; list them with GET /v1/approvals`,
  );
}

function notAllowed(method: string): Response {
  return jsonError(405, "method_not_allowed", `Use ${method} here`, { Allow: method });
}
