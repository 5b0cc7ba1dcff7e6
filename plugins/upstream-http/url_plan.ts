/**
 * The plan for an upstream reached over HTTP (Streamable HTTP or legacy SSE): the relay worker
 * may open connections to the URL's one host and port, and nothing else.
 * @module
 */
import {
  GatewayError,
  type UpstreamPlan,
  type UpstreamServerSpec,
  urlPort,
} from "../../core/plugin_api/mod.ts";

/** Plans one HTTP-based upstream; `config_invalid` names the server when its URL is unusable. */
export function planUrl(
  server: UpstreamServerSpec,
  options: { maxMessageBytes: number },
  transport: "http" | "sse",
): UpstreamPlan {
  const example = transport === "sse"
    ? "https://mcp.example.com/sse"
    : "https://mcp.example.com/mcp";
  const invalid = (what: string) =>
    new GatewayError(
      "config_invalid",
      `Upstream "${server.id}" ${what}; set url to its ${transport === "sse" ? "SSE" : "MCP"} ` +
        `endpoint, e.g. ${example}`,
      { server: server.id },
    );
  if (!server.url) throw invalid("has no url");
  let url: URL;
  try {
    url = new URL(server.url);
  } catch {
    throw invalid(`has url ${JSON.stringify(server.url)}, which is not a valid URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw invalid(`has url ${JSON.stringify(server.url)}, which is not http(s)`);
  }
  const port = urlPort(url);
  return {
    // One host:port: a redirect or an injected URL elsewhere is refused by Deno, not by us.
    permissions: {
      net: [`${url.hostname}:${port}`],
      read: false,
      write: false,
      env: false,
      run: false,
      sys: false,
    },
    start: {
      serverId: server.id,
      transport,
      url: url.href,
      headers: { ...server.headers },
      maxMessageBytes: options.maxMessageBytes,
    },
  };
}
