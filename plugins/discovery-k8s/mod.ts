/**
 * Discovery over Kubernetes: Services annotated `agent33.io/mcp: "true"`. Reaches the API in
 * cluster through the service account (KUBERNETES_SERVICE_HOST/PORT, its token and CA), or
 * through `MCP_K8S_API` (+ `MCP_K8S_TOKEN`); `MCP_K8S_NAMESPACE` limits it to one namespace.
 * @module
 */
import { definePlugin, type DiscoverySource } from "../../core/plugin_api.ts";
import { K8sSource } from "./k8s_source.ts";

const ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount";

export default definePlugin({
  name: "discovery-k8s",
  version: "1.0.0",
  kind: "discovery",
  description: "Proposes Kubernetes Services annotated agent33.io/mcp as upstream servers",
  permissions: { net: true, env: true, read: [ACCOUNT] },
  create(): DiscoverySource {
    // Nothing is read until asked: the kernel creates every plugin, wanted or not.
    let source: K8sSource | undefined;
    const get = async () => source ??= await connect();
    return {
      list: async () => await (await get()).list(),
      async *discover(signal) {
        yield* (await get()).discover(signal);
      },
    };
  },
});

async function connect(): Promise<K8sSource> {
  const env = (name: string) => Deno.env.get(name);
  const namespace = env("MCP_K8S_NAMESPACE");
  const api = env("MCP_K8S_API");
  if (api) {
    const token = env("MCP_K8S_TOKEN");
    return new K8sSource({ api, ...(token ? { token } : {}), ...(namespace ? { namespace } : {}) });
  }
  const host = env("KUBERNETES_SERVICE_HOST");
  if (!host) {
    throw new Error(
      "discovery-k8s: not in a cluster (no KUBERNETES_SERVICE_HOST); set MCP_K8S_API (and MCP_K8S_TOKEN) to reach the API server",
    );
  }
  const token = (await Deno.readTextFile(`${ACCOUNT}/token`)).trim();
  const ca = await Deno.readTextFile(`${ACCOUNT}/ca.crt`);
  const client = Deno.createHttpClient({ caCerts: [ca] });
  const port = env("KUBERNETES_SERVICE_PORT") ?? "443";
  return new K8sSource({
    api: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    token,
    ...(namespace ? { namespace } : {}),
    fetch: (input, init) => fetch(input, { ...init, client }),
  });
}
