/**
 * The translation between an identity provider's scope names and the gateway's own
 * (`mcp`, `approver`, `operator`, `admin`), as MCP_AUTH_OAUTH_SCOPE_MAP writes it:
 * `mcp:tools=mcp,gw.admin=admin`. Only the listed provider scopes grant anything; the rest a
 * token carries (`openid`, `profile`, another API's) are ignored.
 * @module
 */
import { KNOWN_SCOPES } from "./token_payload.ts";

/** Provider scope → the gateway scopes it grants, in the order written. */
export type ScopeMap = ReadonlyMap<string, readonly string[]>;

/** MCP_AUTH_OAUTH_SCOPE_MAP's default: each gateway scope is a provider scope of the same name. */
export const IDENTITY_SCOPE_MAP: ScopeMap = new Map(KNOWN_SCOPES.map((s) => [s, [s]]));

// RFC 6749 §3.3 scope-token: visible ASCII except space, `"` and `\`; `=` and `,` separate here.
const PROVIDER_SCOPE = /^[\x21\x23-\x2b\x2d-\x3c\x3e-\x5b\x5d-\x7e]{1,200}$/;

/**
 * Parses `provider=gateway` pairs separated by commas (a provider scope may repeat to grant
 * several gateway scopes); the result, or a message naming the bad pair and the fix.
 */
export function parseScopeMap(text: string): { ok: true; map: ScopeMap } | {
  ok: false;
  message: string;
} {
  const map = new Map<string, string[]>();
  const pairs = text.split(",").map((p) => p.trim()).filter(Boolean);
  if (pairs.length === 0) {
    return {
      ok: false,
      message: "MCP_AUTH_OAUTH_SCOPE_MAP is empty; write provider=gateway pairs",
    };
  }
  for (const pair of pairs) {
    const at = pair.lastIndexOf("=");
    const provider = pair.slice(0, at).trim();
    const gateway = pair.slice(at + 1).trim();
    if (at <= 0 || !PROVIDER_SCOPE.test(provider)) {
      return {
        ok: false,
        message: `MCP_AUTH_OAUTH_SCOPE_MAP entry "${pair}" is not provider_scope=gateway_scope ` +
          '(e.g. "mcp:tools=mcp")',
      };
    }
    if (!(KNOWN_SCOPES as readonly string[]).includes(gateway)) {
      return {
        ok: false,
        message: `MCP_AUTH_OAUTH_SCOPE_MAP entry "${pair}" maps to "${gateway}", which is not a ` +
          `gateway scope; use one of ${KNOWN_SCOPES.join(", ")}`,
      };
    }
    const granted = map.get(provider) ?? [];
    if (!granted.includes(gateway)) granted.push(gateway);
    map.set(provider, granted);
  }
  return { ok: true, map };
}

/** The gateway scopes a token's provider scopes grant, de-duplicated. */
export function mapScopes(map: ScopeMap, providerScopes: readonly string[]): string[] {
  const granted = new Set<string>();
  for (const scope of providerScopes) for (const g of map.get(scope) ?? []) granted.add(g);
  return [...granted];
}

/**
 * The provider scope a client should ask for to get `gateway` (for `scope="…"` in a 403
 * challenge): the first one mapped to it, else the first mapped to `admin`, which implies it.
 */
export function providerScopeFor(map: ScopeMap, gateway: string): string | undefined {
  for (const wanted of [gateway, "admin"]) {
    for (const [provider, granted] of map) if (granted.includes(wanted)) return provider;
  }
  return undefined;
}
