import assert from "node:assert/strict";
import { SignJWT } from "jose";
import { fixture, writeFleet } from "../../tests/support/fleet.ts";
import { startGateway } from "../../tests/support/gateway.ts";
import { OPENAPI_PATH, openApiDocument } from "./openapi.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;
const SECRET = "a-jwt-secret-of-at-least-thirty-two-bytes";
const METHODS = ["get", "post", "put", "patch", "delete", "head"] as const;

type Operation = { parameters?: { name: string; in: string; example?: string }[] };
type Paths = Record<string, Partial<Record<(typeof METHODS)[number], Operation>>>;

const paths = () => openApiDocument().paths as Paths;

Deno.test("The OpenAPI document is 3.1 with bearer security, and every guarded operation documents 401 and 403", () => {
  const doc = openApiDocument();
  assert.equal(doc.openapi, "3.1.0");
  assert.deepEqual(doc.security, [{ bearer: [] }]);
  for (const [path, item] of Object.entries(paths())) {
    for (const [method, operation] of Object.entries(item)) {
      const o = operation as { "x-required-scopes"?: string[]; responses: Record<string, unknown> };
      if (o["x-required-scopes"]) {
        assert.ok(o.responses["403"], `${method} ${path} documents 403`);
        assert.ok(o.responses["401"], `${method} ${path} documents 401`);
      }
      for (const name of path.match(/\{(\w+)\}/g) ?? []) {
        const declared = (operation as Operation).parameters?.some((p) =>
          `{${p.name}}` === name && p.in === "path"
        );
        assert.ok(declared, `${method} ${path} declares its path parameter ${name}`);
      }
    }
  }
});

Deno.test("Every documented path and method is served, and every mounted route is documented", async () => {
  const fleet = await writeFleet(`proxy_servers:
  - id: one
    command: ["deno", "run", "--config", "${DENO_JSON}", "${fixture("upstreams/fault_server.ts")}"]
    sandbox: deno
    env: { FAULT: none }
    permissions: { env: [FAULT], read: true }
`);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_AUTH_JWT_SECRET: SECRET,
  });
  try {
    await gateway.kernel.fleetStarted;
    // An operator can reach every route; admin-only ones answer 403, which still proves routing.
    const operator = await new SignJWT({ tenant: "default", scope: "operator" })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("openapi-test")
      .setExpirationTime("5m")
      .sign(new TextEncoder().encode(SECRET));
    const documented = paths();
    for (const [path, item] of Object.entries(documented)) {
      for (const [method, operation] of Object.entries(item)) {
        let url = path;
        for (const p of operation.parameters ?? []) {
          if (p.in !== "path") continue;
          // Upstream ids must name a real server; other ids may be unknown (a handler's 404).
          const value = ["id", "server_id", "server"].includes(p.name) && path.includes("server")
            ? "one"
            : p.example ?? "x";
          url = url.replace(`{${p.name}}`, value);
        }
        const post = method === "post";
        const response = await fetch(`${gateway.url}${url}`, {
          method: method.toUpperCase(),
          headers: {
            Authorization: `Bearer ${operator}`,
            Accept: "application/json, text/event-stream",
            ...(post ? { "Content-Type": "application/json" } : {}),
          },
          ...(post ? { body: "{}" } : {}),
        });
        // Streams (SSE) stay open: read only what tells routing apart, then let go.
        const text = response.headers.get("content-type")?.includes("event-stream")
          ? ""
          : await response.text();
        await response.body?.cancel().catch(() => {});
        assert.notEqual(response.status, 405, `${method} ${url} is allowed: ${text}`);
        // A handler's own 404 (an unknown approval id) is fine; the listener's "nothing here" is not.
        assert.ok(
          response.status !== 404 || !/Nothing is served at/.test(text),
          `${method.toUpperCase()} ${url} is served: ${text}`,
        );
      }
    }

    for (const route of gateway.kernel.httpRoutes) {
      // HEAD is GET without a body; the document describes GET.
      for (const method of route.methods.filter((m) => m !== "HEAD")) {
        const covered = Object.entries(documented).some(([path, item]) =>
          (path === route.path || (route.prefix && path.startsWith(`${route.path}/`))) &&
          item[method.toLowerCase() as (typeof METHODS)[number]] !== undefined
        );
        assert.ok(covered, `${method} ${route.path}${route.prefix ? "/…" : ""} is documented`);
      }
    }

    const served = await fetch(`${gateway.url}${OPENAPI_PATH}`, {
      headers: { Authorization: `Bearer ${operator}` },
    });
    assert.deepEqual(await served.json(), openApiDocument());
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
});

Deno.test("Every operation documents the listener's own answers: 400 invalid path, 503 shutting down, and 408/413 where it takes a body", () => {
  for (const [path, methods] of Object.entries(paths())) {
    for (const [method, operation] of Object.entries(methods)) {
      const o = operation as { requestBody?: unknown; responses: Record<string, unknown> };
      if (!("x-required-scopes" in (operation as object)) && !o.responses["401"]) continue;
      assert.ok(o.responses["400"], `${method} ${path} documents 400`);
      assert.ok(o.responses["503"], `${method} ${path} documents 503`);
      if (o.requestBody) {
        assert.ok(o.responses["408"], `${method} ${path} documents 408`);
        assert.ok(o.responses["413"], `${method} ${path} documents 413`);
      }
    }
  }
});
