/**
 * Every event the gateway publishes, as one discriminated union, and the bus subject of each.
 *
 * Subjects are listed here and nowhere else; a NATS bus publishes each event on its subject.
 * @module
 */

/**
 * What a call may do, least to most: the effect class a policy gives each tool, and every
 * governance event names. Declared with the events (the lowest room that needs it).
 */
export type EffectClass = "read" | "write" | "destructive";

/** Events the gateway publishes. */
export type GatewayEvent =
  | { type: "gateway.started"; transport: string; url?: string }
  | { type: "gateway.stopping" }
  | { type: "plugin.loaded"; plugin: string; kind: string; path: string }
  | { type: "plugin.failed"; path: string; reason: string }
  | { type: "tools.changed"; count: number }
  | { type: "session.opened"; sessionId: string; transport: string; tenant: string }
  | { type: "session.closed"; sessionId: string; transport: string; tenant: string }
  | {
    type: "proxy.state";
    server: string;
    instance?: string;
    from: string;
    to: string;
    reason?: string;
  }
  | {
    type: "proxy.breaker";
    server: string;
    instance?: string;
    from: string;
    to: string;
    trips: number;
    retryAfterMs?: number;
  }
  | {
    type: "proxy.health";
    server: string;
    instance?: string;
    ok: boolean;
    latencyMs: number;
    error?: string;
  }
  | { type: "proxy.tools"; server: string; instance?: string; count: number }
  | { type: "proxy.tool_dropped"; server: string; instance?: string; tool: string; reason: string }
  | { type: "fleet.reloaded"; path: string; added: string[]; removed: string[]; changed: string[] }
  | { type: "fleet.reload_failed"; path: string; reason: string }
  | { type: "scanner.findings"; server: string; findings: number; worst?: string }
  | { type: "scanner.quarantined"; server: string; tool: string; reason: string }
  | { type: "scanner.released"; server: string; tool: string; by: string }
  | {
    /** Running discovery saw a new candidate (or a changed one), proposed as `proposal`. */
    type: "discovery.candidate_added";
    /** The discovery plugin that found it, e.g. `discovery-k8s`. */
    plugin: string;
    source: string;
    id: string;
    url: string;
    transport: string;
  }
  | { type: "discovery.candidate_removed"; plugin: string; source: string; id: string }
  | {
    /** A running discovery source failed or timed out; it is retried after `retryInMs`. */
    type: "discovery.source_error";
    plugin: string;
    reason: string;
    retryInMs: number;
  }
  | { type: "policy.reloaded"; path: string; files: string[] }
  | { type: "policy.reload_failed"; path: string; reason: string }
  | {
    /** One governance decision, as audited (never the raw arguments). */
    type: "governance.decision";
    /** ISO time of the decision. */
    time: string;
    tenant: string;
    subject: string;
    tool: string;
    server?: string;
    /** Set when a resource or prompt was used (`resources/read`, `prompts/get`, …), not a tool. */
    surface?: string;
    effect: EffectClass;
    verdict: "allow" | "deny" | "approval_required";
    code?: string;
    rule?: string;
    argumentsHash: string;
    /** The replica that decided (cluster mode). */
    replica?: string;
  }
  | {
    /** An approval request's lifecycle (never the raw arguments, never the token). */
    type: "approval.requested" | "approval.approved" | "approval.denied";
    id: string;
    tenant: string;
    subject: string;
    tool: string;
    server?: string;
    effect: EffectClass;
    argumentsHash: string;
    /** Requested/denied: when the request lapses. Approved: when the issued token expires. */
    expiresAt: number;
    /** The replica that made the change (cluster mode). */
    replica?: string;
    /** Who approved or denied it. */
    by?: string;
    /** Why it was denied, when the approver said. */
    reason?: string;
  };

/** The `type` of a {@link GatewayEvent}. */
export type GatewayEventType = GatewayEvent["type"];

/** Prefix of every subject; one place to change it. */
export const SUBJECT_PREFIX = "agent33.mcp";

/** The bus subject an event is published on. */
export function subjectOf(event: GatewayEvent): string {
  switch (event.type) {
    case "gateway.started":
    case "gateway.stopping":
      return `${SUBJECT_PREFIX}.gateway.${event.type.slice("gateway.".length)}`;
    case "plugin.loaded":
    case "plugin.failed":
      return `${SUBJECT_PREFIX}.plugins.${event.type.slice("plugin.".length)}`;
    case "tools.changed":
      return `${SUBJECT_PREFIX}.tools.changed`;
    case "session.opened":
    case "session.closed":
      return `${SUBJECT_PREFIX}.sessions.${event.type.slice("session.".length)}`;
    case "proxy.state":
    case "proxy.breaker":
    case "proxy.health":
    case "proxy.tools":
    case "proxy.tool_dropped":
      return `${SUBJECT_PREFIX}.proxy.${event.server}.${event.type.slice("proxy.".length)}`;
    case "fleet.reloaded":
    case "fleet.reload_failed":
      return `${SUBJECT_PREFIX}.fleet.${event.type.slice("fleet.".length)}`;
    case "scanner.findings":
    case "scanner.quarantined":
    case "scanner.released":
      return `${SUBJECT_PREFIX}.scanner.${event.server}.${event.type.slice("scanner.".length)}`;
    case "discovery.candidate_added":
    case "discovery.candidate_removed":
    case "discovery.source_error":
      return `${SUBJECT_PREFIX}.discovery.${event.type.slice("discovery.".length)}`;
    case "policy.reloaded":
    case "policy.reload_failed":
      return `${SUBJECT_PREFIX}.policy.${event.type.slice("policy.".length)}`;
    case "governance.decision":
      return `${SUBJECT_PREFIX}.governance.decision`;
    case "approval.requested":
    case "approval.approved":
    case "approval.denied":
      return `${SUBJECT_PREFIX}.approvals.${event.type.slice("approval.".length)}`;
  }
}
