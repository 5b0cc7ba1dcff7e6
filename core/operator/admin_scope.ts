/**
 * Who may do what over HTTP: the MCP endpoints need scope `mcp`, deciding approvals `approver`,
 * reading and restarting `operator`, changing the gateway `admin` (which also grants the other
 * three). `approver` and `operator` reach the token's own tenant: what spans tenants (the fleet,
 * metrics, findings, restarts) also needs `all_tenants`, and the routes that hold one tenant's
 * data (approvals, the event trail) show a confined caller its own tenant's only. A refusal names
 * the scope that is missing and the request it guards.
 * @module
 */
import {
  ALL_TENANTS,
  hasScope,
  reachesAllTenants,
  type TokenPayload,
} from "../auth/token_payload.ts";
import { decodeSegment, invalidPath, jsonError } from "../http/http_listener.ts";

/**
 * What a request does: `mcp` uses the MCP endpoints, `approve` decides an approval, `observe`
 * reads what an operator of one tenant may see (its tenant's event trail, the API's description),
 * `read` and `operate` (restart, release) are for operators of the whole gateway, `admin` changes
 * it.
 */
export type AdminAccess = "mcp" | "approve" | "observe" | "read" | "operate" | "admin";

/** The scopes that grant each kind of access; the last one is the one to ask for. */
export const SCOPES_FOR: Readonly<Record<AdminAccess, readonly string[]>> = {
  mcp: ["admin", "mcp"],
  approve: ["admin", "approver"],
  observe: ["admin", "operator"],
  read: ["admin", "operator"],
  operate: ["admin", "operator"],
  admin: ["admin"],
};

/** Access to what belongs to every tenant at once: an operator must reach every tenant. */
const GATEWAY_WIDE: ReadonlySet<AdminAccess> = new Set(["read", "operate"]);

/** The hint a `--no-auth` caller gets: the anonymous caller holds scope `mcp` only. */
export const NO_AUTH_ADMIN_HINT =
  "with --no-auth the anonymous caller holds scope mcp only; start with --no-auth --no-auth-admin " +
  "(loopback only) to use the admin API and decide approvals without a token";

/** A 403 naming the missing scope, or undefined when the caller may do `what`. */
export function refuseScope(
  auth: TokenPayload,
  access: AdminAccess,
  what: string,
): Response | undefined {
  const scopes = SCOPES_FOR[access];
  if (hasScope(auth, ...scopes)) {
    if (!GATEWAY_WIDE.has(access) || reachesAllTenants(auth)) return undefined;
    return jsonError(
      403,
      "forbidden",
      `Caller "${auth.subject}" is an operator of tenant "${auth.tenant}" only, and ${what} ` +
        `covers every tenant; use a token that also holds scope ${ALL_TENANTS} (or admin)`,
      {
        "WWW-Authenticate":
          `Bearer realm="agent33", error="insufficient_scope", scope="operator ${ALL_TENANTS}"`,
      },
    );
  }
  const needed = scopes.join(" or ");
  const fix = auth.anonymous ? NO_AUTH_ADMIN_HINT : `use a token with scope ${scopes.at(-1)}`;
  return jsonError(
    403,
    "forbidden",
    `Caller "${auth.subject}" lacks scope ${needed}, which ${what} needs; ${fix}`,
    {
      "WWW-Authenticate": `Bearer realm="agent33", error="insufficient_scope", scope="${
        scopes.at(-1)
      }"`,
    },
  );
}

/** A 405 naming the methods that are served at `path`. */
export function methodNotAllowed(method: string, path: string, allowed: string[]): Response {
  return jsonError(
    405,
    "method_not_allowed",
    `${method} is not supported on ${path}; use ${allowed.join(", ")}`,
    { Allow: allowed.join(", ") },
  );
}

/**
 * The decoded segments of `pathname` below `base`, or a 400 `invalid_path` when one does not
 * decode or decodes to something no id contains (see {@link decodeSegment}).
 */
export function pathParams(pathname: string, base: string): string[] | Response {
  const params: string[] = [];
  for (const raw of pathname.slice(base.length).split("/").filter(Boolean)) {
    const decoded = decodeSegment(raw);
    if (!decoded.ok) return invalidPath(pathname, decoded.why);
    params.push(decoded.segment);
  }
  return params;
}
