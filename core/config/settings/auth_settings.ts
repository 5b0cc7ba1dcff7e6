/**
 * The environment variables of who may call: tokens, JWT, OAuth: each declared once, with its
 * parser, default and meaning (core/config/settings/settings.ts joins the groups; docs are generated).
 * @module
 */
import { z } from "zod";
import {
  DEFAULT_CLOCK_TOLERANCE_SECONDS,
  DEFAULT_JWKS_COOLDOWN_SECONDS,
  DEFAULT_SCOPE_CLAIMS,
  hs256SecretTooShort,
  MIN_HS256_SECRET_BYTES,
} from "../../auth/jwt_verifier.ts";
import { IDENTITY_SCOPE_MAP, parseScopeMap } from "../../auth/scope_map.ts";
import { KNOWN_SCOPES } from "../../auth/token_payload.ts";
import { bool, int, list, setting, text } from "./setting.ts";
import { isSecureOrLoopback } from "../../auth/issuer_metadata.ts";

/** The variables of who may call: tokens, JWT, OAuth. */
export const AUTH_SETTINGS = {
  MCP_SERVER_AUTH_TOKEN: setting({
    group: "auth",
    schema: text,
    shownDefault: "generated and printed at start",
    meaning:
      "Client bearer token (identity `static-token`); its scopes are `MCP_SERVER_AUTH_SCOPES` ([auth.md](auth.md))",
  }),
  MCP_SERVER_AUTH_SCOPES: setting({
    group: "auth",
    schema: list.transform((v, ctx) => {
      if (v === undefined) return undefined;
      const unknown = v.filter((s) => !(KNOWN_SCOPES as readonly string[]).includes(s));
      if (unknown.length === 0 && v.length > 0) return v;
      ctx.addIssue({
        code: "custom",
        message: `MCP_SERVER_AUTH_SCOPES must list scopes out of ${KNOWN_SCOPES.join(", ")}` +
          (unknown.length ? `, received "${unknown.join(", ")}"` : ""),
      });
      return z.NEVER;
    }),
    default: ["mcp"],
    meaning:
      "Comma-separated scopes of `MCP_SERVER_AUTH_TOKEN`: `mcp`, `approver`, `operator`, `admin`, `all_tenants`",
  }),
  MCP_ADMIN_TOKEN: setting({
    group: "auth",
    schema: text,
    shownDefault: "generated and printed at start when no source grants `admin`",
    meaning:
      "The operator's bearer token (identity `admin-token`, scope `admin`): admin API, dashboard, approvals; must differ from `MCP_SERVER_AUTH_TOKEN`",
  }),
  MCP_AUTH_TOKENS_FILE: setting({
    group: "auth",
    schema: text,
    shownDefault: "none",
    meaning: "YAML/JSON file of hashed tokens with tenant, scopes (default `[mcp]`), subject",
  }),
  MCP_AUTH_JWT_SECRET: setting({
    group: "auth",
    schema: text.refine(
      (v) => v === undefined || new TextEncoder().encode(v).length >= MIN_HS256_SECRET_BYTES,
      { error: (iss) => hs256SecretTooShort(new TextEncoder().encode(String(iss.input)).length) },
    ),
    shownDefault: "none",
    meaning:
      "HS256 secret for JWT bearer tokens; at least 32 bytes, or the gateway refuses to start",
  }),
  MCP_AUTH_JWT_CLOCK_TOLERANCE: setting({
    group: "auth",
    schema: int("MCP_AUTH_JWT_CLOCK_TOLERANCE", 0, 600),
    shownDefault: `\`${DEFAULT_CLOCK_TOLERANCE_SECONDS}\``,
    meaning: "Seconds of clock skew allowed on JWT `exp` and `nbf` (every JWT must carry `exp`)",
  }),
  MCP_AUTH_JWKS_URL: setting({
    group: "auth",
    schema: text.refine((v) => v === undefined || URL.canParse(v), {
      message:
        "MCP_AUTH_JWKS_URL must be an absolute URL, e.g. https://idp.example.com/.well-known/jwks.json",
    }),
    shownDefault: "none",
    meaning:
      "JWKS URL for asymmetric JWT bearer tokens; refused at start without `MCP_AUTH_JWT_AUDIENCE`",
  }),
  MCP_AUTH_JWT_ISSUER: setting({
    group: "auth",
    schema: text,
    shownDefault: "any",
    meaning: "Required JWT `iss`",
  }),
  MCP_AUTH_JWT_AUDIENCE: setting({
    group: "auth",
    schema: text,
    shownDefault: "any (required with a JWKS)",
    meaning: "Required JWT `aud`",
  }),
  MCP_AUTH_JWKS_COOLDOWN: setting({
    group: "auth",
    schema: int("MCP_AUTH_JWKS_COOLDOWN", 0, 86_400),
    shownDefault: `\`${DEFAULT_JWKS_COOLDOWN_SECONDS}\``,
    meaning:
      "Seconds after a JWKS fetch, failed or not, before a token with an unknown key id may cause another (how soon a rotated key is picked up)",
  }),
  MCP_AUTH_OAUTH_ISSUER: setting({
    group: "auth",
    schema: text.refine((v) => v === undefined || secureUrl(v), {
      message: "MCP_AUTH_OAUTH_ISSUER must be an https URL (http only on a loopback host), " +
        "e.g. https://idp.example.com/realms/agents",
    }),
    shownDefault: "none",
    meaning:
      "OAuth/OIDC issuer (exactly its `iss`): the gateway becomes an OAuth protected resource, publishes `/.well-known/oauth-protected-resource` and verifies tokens with the issuer's keys ([auth.md](auth.md#connecting-an-identity-provider-oauth))",
  }),
  MCP_AUTH_OAUTH_RESOURCE: setting({
    group: "auth",
    schema: text.refine(
      (v) => v === undefined || (URL.canParse(v) && /^https?:$/.test(new URL(v).protocol)),
      {
        message:
          "MCP_AUTH_OAUTH_RESOURCE must be an absolute http(s) URL, e.g. https://gw.example.com/mcp",
      },
    ).refine((v) => v === undefined || !v.includes("#"), {
      message: "MCP_AUTH_OAUTH_RESOURCE must not have a fragment (RFC 8707 §2)",
    }),
    shownDefault: "`http://<host>:<port>/mcp` on a loopback host; required otherwise",
    meaning: "The URL clients use for `/mcp`; tokens must carry it in `aud`",
  }),
  MCP_AUTH_OAUTH_SCOPE_MAP: setting({
    group: "auth",
    schema: text.transform((v, ctx) => {
      if (v === undefined) return undefined;
      const parsed = parseScopeMap(v);
      if (parsed.ok) return parsed.map;
      ctx.addIssue({ code: "custom", message: parsed.message });
      return z.NEVER;
    }),
    default: IDENTITY_SCOPE_MAP,
    meaning: "`provider_scope=gateway_scope` pairs; only listed provider scopes grant anything",
  }),
  MCP_AUTH_OAUTH_AUDIENCE: setting({
    group: "auth",
    schema: list,
    shownDefault: "the resource URL",
    meaning: "Comma-separated `aud` values accepted instead (Entra ID: the app's client id)",
  }),
  MCP_AUTH_OAUTH_SCOPE_CLAIMS: setting({
    group: "auth",
    schema: list,
    default: [...DEFAULT_SCOPE_CLAIMS],
    meaning:
      "Claims the scopes are read from (`roles` for Entra app roles, `permissions` for Auth0 RBAC)",
  }),
  MCP_AUTH_OAUTH_TENANT_CLAIM: setting({
    group: "auth",
    schema: text,
    default: "tenant",
    meaning: "Access-token claim naming the caller's tenant",
  }),
  MCP_AUTH_OAUTH_TENANT_DEFAULT: setting({
    group: "auth",
    schema: text,
    shownDefault: "none (refused)",
    meaning: "Tenant of an OAuth token without that claim",
  }),
  MCP_AUTH_DISABLED: setting({
    group: "auth",
    schema: bool("MCP_AUTH_DISABLED"),
    default: false,
    meaning:
      "Same as `--no-auth` (loopback only): no credentials, the caller holds scope `mcp` only",
  }),
  MCP_AUTH_DISABLED_ADMIN: setting({
    group: "auth",
    schema: bool("MCP_AUTH_DISABLED_ADMIN"),
    default: false,
    meaning: "Same as `--no-auth-admin`: with `--no-auth`, the anonymous caller also holds `admin`",
  }),
};

/** An https URL (http only on a loopback host) without a fragment. */
function secureUrl(v: string): boolean {
  return URL.canParse(v) && isSecureOrLoopback(new URL(v)) && !new URL(v).hash;
}
