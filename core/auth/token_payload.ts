/**
 * The caller identity every request carries once authenticated.
 * @module
 */

/** Who is calling: resolved from a credential before any service is touched. */
export interface TokenPayload {
  tenant: string;
  scopes: string[];
  subject: string;
}

/** Whether a payload holds one of the scopes. */
export function hasScope(p: TokenPayload, ...scopes: string[]): boolean {
  return scopes.some((s) => p.scopes.includes(s));
}
