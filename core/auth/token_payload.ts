/**
 * The caller identity every request carries once authenticated.
 * @module
 */

/**
 * The scopes a token can hold (several at once): `mcp` uses the MCP endpoints, `approver` decides
 * approvals, `operator` reads and restarts, `admin` may do all of it and change the gateway.
 */
export const KNOWN_SCOPES = ["mcp", "approver", "operator", "admin"] as const;

/** Who is calling: resolved from a credential before any service is touched. */
export interface TokenPayload {
  tenant: string;
  scopes: string[];
  /**
   * The caller's stable identity: a token's configured name, a tokens-file subject (or hash
   * prefix), a JWT `sub`. Approvals compare it: the requester of an approval can never decide it.
   */
  subject: string;
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

/** Whether a payload holds one of the scopes. */
export function hasScope(p: TokenPayload, ...scopes: string[]): boolean {
  return scopes.some((s) => p.scopes.includes(s));
}
