/**
 * Which caller tokens `auth: passthrough` may forward. Only an OAuth/JWT access token the
 * gateway verified, issued for the upstream too (its `aud` names the upstream's URL, or the
 * entry's `passthrough_audience`), and carrying no gateway power beyond `mcp`: a static,
 * generated or tokens-file token, or one with `admin`/`operator`/`approver`, never leaves the
 * gateway, because the upstream could replay it against the gateway itself.
 * @module
 */
import type { TokenPayload } from "../auth/token_payload.ts";
import type { FleetServer } from "./fleet_config.ts";

/** The gateway scopes that must never reach an upstream. */
const PRIVILEGED = ["admin", "operator", "approver", "all_tenants"];

const KIND_NAMES: Record<string, string> = {
  static: "a gateway static token",
  tokens_file: "a gateway tokens-file token",
  unknown: "not a verified JWT",
};

/** What the caller's token may do for one passthrough upstream. */
export type PassthroughBearer = { bearer: string } | { refused: string };

/** The audiences that name an upstream: the entry's `passthrough_audience`, else its URL. */
export function passthroughAudiences(server: FleetServer): string[] {
  if (server.passthroughAudience?.length) return server.passthroughAudience;
  if (server.url === undefined) return [];
  const url = new URL(server.url);
  return [...new Set([server.url, url.origin, `${url.origin}/`])];
}

/** Decides whether `bearer` (the session's token, resolved to `auth`) may go to `server`. */
export function passthroughBearer(
  server: FleetServer,
  auth: TokenPayload,
  bearer: string | undefined,
): PassthroughBearer | undefined {
  if (bearer === undefined) return undefined;
  const why = (reason: string) => ({
    refused: `Upstream "${server.id}" forwards its caller's bearer token (auth: passthrough), ` +
      `but ${reason}; the token was not sent`,
  });
  if (auth.kind !== "jwt") {
    return why(
      `this session's token is ${KIND_NAMES[auth.kind ?? "unknown"]}, which never leaves the ` +
        "gateway; connect with an OAuth/JWT access token issued for the upstream too",
    );
  }
  const privileged = PRIVILEGED.filter((s) => auth.scopes.includes(s));
  if (privileged.length) {
    return why(
      `this session's token holds the gateway scope ${privileged.join(", ")}, which must not ` +
        "reach an upstream; connect with a token that holds mcp only",
    );
  }
  const wanted = passthroughAudiences(server);
  if (!(auth.audience ?? []).some((aud) => wanted.includes(aud))) {
    return why(
      `this session's token is not issued for it (its aud claim names none of ` +
        `${wanted.map((a) => `"${a}"`).join(", ")}); ask the identity provider for a token ` +
        `with that audience, or set passthrough_audience in the fleet entry (line ${server.line})`,
    );
  }
  return { bearer };
}
