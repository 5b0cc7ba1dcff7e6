/**
 * Discovery over Kubernetes: Services annotated `agent33.io/mcp: "true"`. Reaches the API server
 * through `MCP_K8S_API` (+ `MCP_K8S_TOKEN`), else a kubeconfig (`KUBECONFIG` or `~/.kube/config`,
 * at the context from `--context` or `MCP_PLUGIN_DISCOVERY_K8S_CONTEXT`, else its
 * current-context), else the in-cluster service account; `MCP_K8S_NAMESPACE` limits it to one
 * namespace.
 * @module
 */
import {
  definePlugin,
  type DiscoverySource,
  type PluginContext,
} from "../../core/plugin_api/mod.ts";
import { type K8sConnection, resolveConnection } from "./connection.ts";
import { K8sSource } from "./k8s_source.ts";

export default definePlugin({
  name: "discovery-k8s",
  version: "1.1.0",
  kind: "discovery",
  description: "Proposes Kubernetes Services annotated agent33.io/mcp as upstream servers",
  // A kubeconfig may name files anywhere and an exec credential plugin to run.
  permissions: { net: true, env: true, read: true, run: true },
  create(ctx): DiscoverySource {
    // Nothing is read until asked: the kernel creates every plugin, wanted or not.
    let source: Promise<K8sSource> | undefined;
    // A failed connect is not kept: the next ask tries again (the kubeconfig may be fixed).
    const get = () =>
      source ??= connect(ctx).catch((error) => {
        source = undefined;
        throw error;
      });
    return {
      list: async (signal) => await (await get()).list(signal),
      async *discover(signal) {
        yield* (await get()).discover(signal);
      },
      // The connection's HTTP clients (CA, client certificate) go with the gateway.
      async close() {
        const open = await source?.catch(() => undefined);
        if (open) connections.get(open)?.close();
      },
    } as DiscoverySource;
  },
});

/** The source over the connection the resolved environment (and the context's config) names. */
async function connect(ctx: PluginContext): Promise<K8sSource> {
  const { config, clock } = ctx;
  const env = { ...ctx.env };
  const context = typeof config.context === "string" && config.context !== ""
    ? config.context
    : undefined;
  const connection: K8sConnection = await resolveConnection({
    env,
    clock,
    ...(context !== undefined ? { context } : {}),
  });
  const namespace = env.MCP_K8S_NAMESPACE;
  // The gateway's bound on a discovery call also bounds each API request's wait for headers.
  const timeout = Number(env.MCP_DISCOVERY_TIMEOUT_MS || 10_000);
  const source = new K8sSource({
    timeoutMs: Number.isInteger(timeout) && timeout > 0 ? timeout : 10_000,
    clock,
    api: connection.api,
    origin: connection.origin,
    fetch: connection.fetch,
    ...(namespace ? { namespace } : {}),
  });
  connections.set(source, connection);
  return source;
}

/** The connection behind each source, closed with the plugin. */
const connections = new WeakMap<K8sSource, K8sConnection>();
