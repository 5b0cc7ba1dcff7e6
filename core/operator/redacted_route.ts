/**
 * The operator API's sink: every JSON or text body an operator route answers is redacted
 * (core/support/redact.ts) before it leaves, so a status, a snapshot or an error quoting an upstream's
 * failure never carries a credential, whichever route built it.
 * @module
 */
import type { HttpRoute } from "../http/http_route.ts";
import { redact, redactDeep } from "../support/redact.ts";

/** `route` with its JSON and plain-text bodies redacted; streams and other bodies pass as they are. */
export function redactedRoute(route: HttpRoute): HttpRoute {
  return {
    ...route,
    handle: async (request, auth, body) => {
      const response = await route.handle(request, auth, body);
      const type = response.headers.get("content-type") ?? "";
      const json = type.includes("application/json");
      if (!response.body || !(json || type.startsWith("text/plain"))) return response;
      const text = await response.text();
      let redacted: string;
      try {
        redacted = json ? JSON.stringify(redactDeep(JSON.parse(text))) : redact(text);
      } catch {
        redacted = redact(text); // not JSON after all: redacted as text
      }
      const headers = new Headers(response.headers);
      headers.delete("content-length"); // the redacted body has its own
      return new Response(redacted, {
        status: response.status,
        statusText: response.statusText,
        headers,
      });
    },
  };
}
