/**
 * Who may use the admin API: reading and restarting need scope `operator` (or `admin`), changing
 * the gateway needs `admin`. A refusal names the scope that is missing and the request it guards.
 * @module
 */
import { hasScope, type TokenPayload } from "../auth/token_payload.ts";
import { decodeSegment, invalidPath, jsonError } from "../http_listener.ts";

/** What a request does: `read` and `operate` (restart, approve) are for operators, `admin` changes. */
export type AdminAccess = "read" | "operate" | "admin";

/** The scopes that grant each kind of access. */
export const SCOPES_FOR: Readonly<Record<AdminAccess, readonly string[]>> = {
  read: ["admin", "operator"],
  operate: ["admin", "operator"],
  admin: ["admin"],
};

/** A 403 naming the missing scope, or undefined when the caller may do `what`. */
export function refuseScope(
  auth: TokenPayload,
  access: AdminAccess,
  what: string,
): Response | undefined {
  const scopes = SCOPES_FOR[access];
  if (hasScope(auth, ...scopes)) return undefined;
  const needed = scopes.join(" or ");
  return jsonError(
    403,
    "forbidden",
    `Caller "${auth.subject}" lacks scope ${needed}, which ${what} needs; ` +
      `use a token with scope ${scopes.at(-1)}`,
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
