/**
 * Which event bus the gateway runs on: the in-process one, or with NATS_URL the `bus-nats`
 * plugin's, which replaces it at start (failing that is fatal: replicas would silently split).
 * @module
 */
import { GatewayError } from "../support/errors.ts";
import type { NonceStore } from "./nonce_store.ts";
import type { EventBus } from "./event_bus.ts";
import type { SharedState } from "./shared_state.ts";
import type { SwitchableEventBus } from "./switchable_event_bus.ts";

/** A bus that can also keep state shared by every replica (JetStream KV). */
interface SharingBus {
  nonceStore?: (options: { ttlMs: number; replicas?: number }) => Promise<NonceStore>;
  sharedState?: (options: { replicas: number }) => Promise<SharedState>;
}

/** What the selected bus shares with the other replicas. */
export interface BusSharing {
  /** Approval nonces, single-use across replicas. */
  nonces?: NonceStore;
  /** Cluster mode: the state the replicas share. */
  shared?: SharedState;
}

/**
 * With `url` set, instantiates the `bus-nats` plugin (through `instantiate`, which reports its
 * failures) and switches `bus` onto it; returns what it shares: the nonce store it offers, and in
 * cluster mode (`cluster` set) the shared state, which such a bus must offer.
 */
export async function selectBus<P extends { manifest: { kind: string; name: string } }>(options: {
  url: string | undefined;
  /** The loaded plugins. */
  plugins: readonly P[];
  bus: SwitchableEventBus;
  instantiate: (plugin: P, extra: Record<string, unknown>) => Promise<unknown>;
  nonceTtlMs: number;
  /** Cluster mode: how many copies the shared buckets keep (MCP_CLUSTER_KV_REPLICAS). */
  cluster?: { kvReplicas: number } | undefined;
}): Promise<BusSharing> {
  const { url, cluster } = options;
  if (url === undefined) return {};
  const plugin = options.plugins.find((p) =>
    p.manifest.kind === "bus" && p.manifest.name === "bus-nats"
  );
  if (!plugin) {
    throw new GatewayError(
      "plugin_invalid",
      "NATS_URL is set but the bus-nats plugin did not load; see the plugin errors above or unset NATS_URL",
    );
  }
  const bus = await options.instantiate(plugin, { url });
  if (!bus) {
    throw new GatewayError(
      "plugin_invalid",
      `Cannot use NATS at ${url}; see the error above, or unset NATS_URL to use the in-process bus`,
    );
  }
  await options.bus.use(bus as EventBus);
  const sharing = bus as SharingBus;
  const result: BusSharing = {};
  if (cluster) {
    if (typeof sharing.sharedState !== "function") {
      throw new GatewayError(
        "plugin_invalid",
        "MCP_CLUSTER=true needs a bus plugin with shared state (bus-nats); unset MCP_CLUSTER",
      );
    }
    result.shared = await sharing.sharedState({ replicas: cluster.kvReplicas });
  }
  // Approval tokens are single-use across replicas when the bus can keep nonces (JetStream KV).
  if (typeof sharing.nonceStore === "function") {
    result.nonces = await sharing.nonceStore({
      ttlMs: options.nonceTtlMs,
      ...(cluster ? { replicas: cluster.kvReplicas } : {}),
    });
  }
  return result;
}
