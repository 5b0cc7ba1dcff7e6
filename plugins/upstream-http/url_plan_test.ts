import assert from "node:assert/strict";
import type { UpstreamServerSpec } from "../../core/plugin_api/mod.ts";
import { planUrl } from "./url_plan.ts";

function server(url: string | undefined, headers: Record<string, string> = {}): UpstreamServerSpec {
  return {
    id: "remote",
    transport: "http",
    ...(url !== undefined ? { url } : {}),
    headers,
    env: {},
    permissions: {},
    sandbox: "none",
  };
}

Deno.test("planUrl grants the worker net for the URL's one host and port, and nothing else", () => {
  const plan = planUrl(
    server("http://127.0.0.1:3001/mcp", { Authorization: "Bearer t" }),
    { maxMessageBytes: 1000 },
    "http",
  );
  assert.deepEqual(plan, {
    permissions: {
      net: ["127.0.0.1:3001"],
      read: false,
      write: false,
      env: false,
      run: false,
      sys: false,
    },
    start: {
      serverId: "remote",
      transport: "http",
      url: "http://127.0.0.1:3001/mcp",
      headers: { Authorization: "Bearer t" },
      maxMessageBytes: 1000,
    },
  });
});

Deno.test("planUrl uses the scheme's default port when the URL has none", () => {
  const net = (url: string) => planUrl(server(url), { maxMessageBytes: 1 }, "sse").permissions.net;
  assert.deepEqual(net("https://mcp.example.com/sse"), ["mcp.example.com:443"]);
  assert.deepEqual(net("http://mcp.example.com/sse"), ["mcp.example.com:80"]);
  assert.deepEqual(net("http://[::1]:8080/sse"), ["[::1]:8080"]);
});

Deno.test("planUrl refuses a missing, invalid or non-http URL with config_invalid naming the server", () => {
  const plan = (url: string | undefined) => () =>
    planUrl(server(url), { maxMessageBytes: 1 }, "http");
  assert.throws(plan(undefined), {
    name: "GatewayError",
    code: "config_invalid",
    message:
      'Upstream "remote" has no url; set url to its MCP endpoint, e.g. https://mcp.example.com/mcp',
  });
  assert.throws(plan("not a url"), {
    code: "config_invalid",
    message: /"not a url", which is not a valid URL/,
  });
  assert.throws(plan("ftp://host/mcp"), {
    code: "config_invalid",
    message: /which is not http\(s\)/,
  });
});
