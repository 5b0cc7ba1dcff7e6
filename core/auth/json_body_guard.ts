/**
 * State-changing requests to the operator API carry JSON or nothing. A browser sends a cross-site
 * form or a `no-cors` fetch (text/plain, form encodings, a typeless Blob) without asking first;
 * `application/json` it must ask for (a CORS preflight, which the gateway never grants). So a body
 * in any other type, or a body with no type, is refused before a handler sees it.
 * @module
 */
import { jsonError } from "../http/http_listener.ts";

/** Methods whose requests change something. */
const CHANGING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * A 415 when a state-changing request has a Content-Type other than `application/json`, or a body
 * without any; undefined when it may proceed (GETs, JSON, and requests without a body).
 */
export function refuseNonJsonBody(request: Request): Response | undefined {
  if (!CHANGING.has(request.method)) return undefined;
  const type = request.headers.get("content-type");
  if (type === null) {
    const length = request.headers.get("content-length");
    const hasBody = request.headers.has("transfer-encoding") ||
      (length !== null && length.trim() !== "0");
    if (!hasBody) return undefined;
  } else if (isJson(type)) {
    return undefined;
  }
  return jsonError(
    415,
    "unsupported_media_type",
    `${request.method} ${new URL(request.url).pathname} takes a JSON body: send it with ` +
      `"Content-Type: application/json"${type === null ? "" : `, not ${JSON.stringify(type)}`}`,
    { "Accept-Post": "application/json" },
  );
}

function isJson(type: string): boolean {
  return type.split(";")[0]!.trim().toLowerCase() === "application/json";
}
