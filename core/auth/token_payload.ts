/**
 * The caller identity every request carries once authenticated.
 * @module
 */

/**
 * The scopes a token can hold (several at once): `mcp` uses the MCP endpoints, `approver` decides
 * approvals, `operator` reads and restarts, `admin` may do all of it and change the gateway.
 * `approver` and `operator` act on the token's own tenant; {@link ALL_TENANTS} widens them to
 * every tenant (`admin` always reaches every tenant).
 */
export const KNOWN_SCOPES = ["mcp", "approver", "operator", "admin", "all_tenants"] as const;

/**
 * The scope that widens a token's `approver` and `operator` from its own tenant to every tenant
 * (and to what belongs to none: the fleet, metrics, the event trail of the whole gateway). On its
 * own it grants nothing: an approver for every tenant holds `approver` and `all_tenants`.
 */
export const ALL_TENANTS = "all_tenants";

/** Who is calling: resolved from a credential before any service is touched. */
export interface TokenPayload {
  tenant: string;
  scopes: string[];
  /**
   * The caller's name as people read it (logs, audit lines, approvals' `by`): a static token's
   * name, a tokens-file subject (or hash prefix), a JWT `sub`. Not an identity on its own: names
   * of different kinds of credential may coincide (a JWT `sub` can be `static-token`); compare
   * {@link principal}.
   */
  subject: string;
  /**
   * Who the caller is, as every comparison of two callers sees it ({@link samePrincipal},
   * {@link sameCaller}): the kind of credential with the subject, and for a JWT the key source and
   * the issuer too. Built once, at authentication, by {@link principalOf}.
   */
  principal: string;
  /** Set for the `--no-auth` caller, so a refusal can name the flag that grants more. */
  anonymous?: true;
  /**
   * Where the credential came from: a static or generated token, the tokens file, or a verified
   * JWT. Only a `jwt` may ever be forwarded to an upstream (`auth: passthrough`).
   */
  kind?: "static" | "tokens_file" | "jwt";
  /** A verified JWT's `aud` values: the services it was issued for. */
  audience?: string[];
}

/**
 * What a principal starts with: the credential kinds of {@link TokenPayload.kind}, and the callers
 * that hold no credential (`--no-auth`, the stdio parent, a public route's caller).
 */
export type PrincipalKind = "static" | "tokens_file" | "jwt" | "anonymous" | "stdio" | "public";

/**
 * A principal from its kind and the parts that identify the caller within it (for a JWT: the
 * key source, the issuer, the subject). A JSON array, so no choice of names can make the parts of
 * one principal read as those of another.
 */
export function principalOf(kind: PrincipalKind, ...parts: string[]): string {
  return JSON.stringify([kind, ...parts]);
}

/**
 * Whether two callers are one person, whatever their tenants and scopes (who may decide whose
 * approval). A side without a principal — a record an older replica or process wrote before
 * records carried one — is nobody: it matches nothing, not even itself.
 */
export function samePrincipal(a: { principal?: string }, b: { principal?: string }): boolean {
  return typeof a.principal === "string" && a.principal !== "" && a.principal === b.principal;
}

/**
 * Whether two callers are the same caller of the same tenant (who owns a session, a paused run,
 * an approval's token); like {@link samePrincipal}, a side without a principal matches nothing.
 */
export function sameCaller(
  a: { tenant: string; principal?: string },
  b: { tenant: string; principal?: string },
): boolean {
  return a.tenant === b.tenant && samePrincipal(a, b);
}

/**
 * Whether the caller's `approver` and `operator` scopes reach every tenant: it holds `admin` or
 * {@link ALL_TENANTS}. Without, they reach its own tenant only.
 */
export function reachesAllTenants(p: { scopes: readonly string[] }): boolean {
  return hasScope(p, "admin", ALL_TENANTS);
}

/**
 * Whether the caller's `approver` and `operator` scopes reach `tenant`'s requests (to see or
 * decide them): its own tenant, or every tenant ({@link reachesAllTenants}).
 */
export function coversTenant(
  p: { tenant: string; scopes: readonly string[] },
  tenant: string,
): boolean {
  return p.tenant === tenant || reachesAllTenants(p);
}

/** Whether a payload holds one of the scopes. */
export function hasScope(p: { scopes: readonly string[] }, ...scopes: string[]): boolean {
  return scopes.some((s) => p.scopes.includes(s));
}
