/**
 * An OAuth issuer's metadata (RFC 8414 `/.well-known/oauth-authorization-server`, else OpenID
 * Connect Discovery `/.well-known/openid-configuration`), fetched with the SDK's discovery: the
 * one thing the gateway needs from it is `jwks_uri`, where the issuer publishes its signing keys.
 *
 * The document is hostile until checked: fetched with a deadline and a size bound, its `issuer`
 * must be exactly the configured one (RFC 8414 §3.3, OIDC Discovery §4.3: otherwise a document
 * served from the issuer's host could vouch for keys of another), and its `jwks_uri` must be
 * https (or http on a loopback host).
 * @module
 */
import { discoverAuthorizationServerMetadata } from "@modelcontextprotocol/sdk/client/auth.js";
import { type Clock, systemClock } from "../support/clock.ts";
import { boundedFetch } from "./bounded_fetch.ts";
import { isLoopbackHost } from "./host_guard.ts";

/** How long one metadata request may take, in ms. */
export const METADATA_TIMEOUT_MS = 5_000;

/** Injected effects of {@link discoverJwksUri}. */
export interface IssuerMetadataDeps {
  fetch?: typeof fetch;
  timeoutMs?: number;
  /** Times the requests; the real clock by default. */
  clock?: Clock;
}

/**
 * Fetches the issuer's metadata and returns its `jwks_uri`; throws an Error naming the issuer,
 * the URL tried and what is wrong.
 */
export async function discoverJwksUri(issuer: string, deps: IssuerMetadataDeps = {}): Promise<URL> {
  const bounded = boundedFetch(
    deps.fetch ?? fetch,
    deps.timeoutMs ?? METADATA_TIMEOUT_MS,
    deps.clock ?? systemClock,
  );
  let metadata: Awaited<ReturnType<typeof discoverAuthorizationServerMetadata>>;
  try {
    metadata = await discoverAuthorizationServerMetadata(issuer, { fetchFn: bounded });
  } catch (e) {
    throw new Error(
      `Cannot read the metadata of OAuth issuer ${issuer} (MCP_AUTH_OAUTH_ISSUER): ${reason(e)}`,
    );
  }
  if (!metadata) {
    throw new Error(
      `OAuth issuer ${issuer} (MCP_AUTH_OAUTH_ISSUER) serves neither ` +
        "/.well-known/oauth-authorization-server nor /.well-known/openid-configuration; " +
        "set the issuer URL exactly as the provider's tokens carry it in `iss`",
    );
  }
  if (metadata.issuer !== issuer) {
    throw new Error(
      `The metadata of OAuth issuer ${issuer} names the issuer "${metadata.issuer}"; ` +
        "set MCP_AUTH_OAUTH_ISSUER to exactly that value (trailing slash included)",
    );
  }
  const jwksUri = metadata.jwks_uri;
  if (typeof jwksUri !== "string" || !URL.canParse(jwksUri)) {
    throw new Error(`The metadata of OAuth issuer ${issuer} has no valid jwks_uri`);
  }
  const url = new URL(jwksUri);
  if (!isSecureOrLoopback(url)) {
    throw new Error(
      `The jwks_uri of OAuth issuer ${issuer} is ${jwksUri}; keys are fetched only over https ` +
        "(or http on a loopback host)",
    );
  }
  return url;
}

/** Whether a URL is https, or http to a loopback host (development and tests). */
export function isSecureOrLoopback(url: URL): boolean {
  if (url.protocol === "https:") return true;
  return url.protocol === "http:" && isLoopbackHost(url.hostname);
}

function reason(e: unknown): string {
  if (e instanceof Error && e.name === "ZodError") {
    const issues = (e as Error & { issues?: { path: PropertyKey[]; message: string }[] }).issues ??
      [];
    const which = issues.slice(0, 3).map((i) =>
      `${i.path.join(".") || "(document)"}: ${i.message}`
    );
    return `the document is not valid metadata (${which.join("; ")})`;
  }
  return e instanceof Error ? e.message : String(e);
}
