/**
 * Where a cluster replica's fleet and policies come from: the shared `agent33_config` bucket
 * ({@link SharedConfig}, the default) or each replica's own mounted files ({@link MountedConfig},
 * MCP_CLUSTER_CONFIG=mounted). The kernel starts, reloads and edits through this interface and
 * never needs to know which.
 * @module
 */
import type { FleetConfig, FleetServer } from "../proxy/fleet_config.ts";
import type { FleetStore } from "../proxy/fleet_store.ts";
import type { FleetDiff } from "../operator/operator_host.ts";
import type { PolicySet } from "../governance/policy.ts";

/** What a config source applies its documents to (the kernel). */
export interface SharedConfigTarget {
  /** Parses fleet text and checks every enabled server can be planned; throws `config_invalid`. */
  checkFleet(text: string, origin: string): FleetConfig;
  /** Applies a checked fleet (one application at a time); publishes `fleet.reloaded`. */
  applyFleet(servers: readonly FleetServer[], origin: string): Promise<FleetDiff>;
  /** Puts compiled policies in force; publishes `policy.reloaded`. */
  applyPolicies(policies: PolicySet, origin: string): void;
}

/** A revision that was refused, and why (`revision` 0 for a mounted file). */
export interface RejectedRevision {
  revision: number;
  reason: string;
}

/** The fleet and policies of one replica in a cluster. */
export interface ClusterConfigSource {
  /** Where fleet edits go (a mounted source refuses them). */
  readonly fleetStore: FleetStore;
  /** The shared fleet revision this replica runs (0 for mounted files). */
  readonly fleetRevision: number;
  /** The shared policy revision in force here (0 for mounted files). */
  readonly policyRevision: number;
  /** A digest of the fleet and policy text in force, so replicas can be compared (mounted files). */
  readonly digests?: { fleet?: string; policies?: string };
  /** The last refused revision of each document, while nothing newer was applied. */
  readonly rejected: { fleet?: RejectedRevision; policies?: RejectedRevision };
  /** The fleet text to start with and where it came from; undefined when there is none. */
  startFleet(): Promise<{ text: string; origin: string } | undefined>;
  /** The policies to start with; undefined for none (the built-in default). */
  startPolicies(): Promise<PolicySet | undefined>;
  /** Applies later changes until {@link close}. */
  watch(): Promise<void>;
  /** Reads the fleet again and applies it now; a bad one keeps the running fleet and throws. */
  reloadFleet(): Promise<FleetDiff>;
  /** Reads the policies again and puts them in force now; a bad one keeps the policy and throws. */
  reloadPolicies(): Promise<void>;
  /** Stops watching. */
  close(): void;
}
