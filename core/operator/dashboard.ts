/**
 * `GET /dashboard`: the operator dashboard, one static page with its script and stylesheet from
 * `core/operator/dashboard/` (no build step).
 *
 * The page is public (it holds no data), so a browser can load it without a token; the operator
 * types a token into it once, and every request it makes for data (`/v1/operator/status`,
 * `/v1/approvals`, `/v1/events`) carries that token as a bearer header like any other client.
 * Only the three files below are served; any other path under `/dashboard/` is a 404.
 * @module
 */
import { jsonError } from "../http/http_listener.ts";
import type { HttpRoute } from "../http/http_route.ts";

/** The path of the dashboard page. */
export const DASHBOARD_PATH = "/dashboard";

const ASSETS: Record<string, string> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "style.css": "text/css; charset=utf-8",
};

/** Scripts and styles from this origin only, no frames, no plugins, data only from this origin. */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** The dashboard route: `/dashboard` and its assets, public, GET and HEAD. */
export function dashboardRoute(): HttpRoute {
  const cache = new Map<string, Uint8Array>();
  const read = async (name: string): Promise<Uint8Array> => {
    let body = cache.get(name);
    if (!body) {
      body = await Deno.readFile(new URL(`./dashboard/${name}`, import.meta.url));
      cache.set(name, body);
    }
    return body;
  };
  return {
    path: DASHBOARD_PATH,
    prefix: true,
    public: true,
    methods: ["GET", "HEAD"],
    async handle(request) {
      const rest = new URL(request.url).pathname.slice(DASHBOARD_PATH.length);
      const name = rest === "" || rest === "/" ? "index.html" : rest.slice(1);
      const type = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
      if (type === undefined) {
        return jsonError(
          404,
          "not_found",
          `Nothing is served at ${DASHBOARD_PATH}${rest}; open ${DASHBOARD_PATH}`,
        );
      }
      const body = await read(name);
      return new Response(request.method === "HEAD" ? null : body.slice(), {
        headers: {
          "Content-Type": type,
          "Content-Length": String(body.byteLength),
          "Cache-Control": "no-cache",
          "Content-Security-Policy": CSP,
          "X-Content-Type-Options": "nosniff",
          "X-Frame-Options": "DENY",
          "Referrer-Policy": "no-referrer",
        },
      });
    },
  };
}
