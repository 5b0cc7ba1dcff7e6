/**
 * Session admission: how many MCP sessions may be open at once, in total and per tenant. Every
 * inbound transport's sessions are admitted here (through the kernel's `serve`) before the bridge
 * builds anything for them, so a flood of sessions costs a refusal, not a server each.
 * @module
 */
import { GatewayError } from "../support/errors.ts";

/** The limits, from MCP_MAX_SESSIONS and MCP_MAX_SESSIONS_PER_TENANT. */
export interface SessionLimits {
  maxSessions: number;
  maxSessionsPerTenant: number;
}

/** Counts open sessions and refuses one past a limit with `session_limit`. */
export class SessionAdmission {
  #limits: SessionLimits;
  #total = 0;
  #perTenant = new Map<string, number>();

  constructor(limits: SessionLimits) {
    this.#limits = limits;
  }

  /** Sessions open now. */
  get open(): number {
    return this.#total;
  }

  /**
   * Admits one session of `tenant`, or throws `session_limit` naming the limit and how to raise
   * it. Returns the release function (safe to call more than once), called when the session ends.
   */
  admit(tenant: string): () => void {
    const { maxSessions, maxSessionsPerTenant } = this.#limits;
    const held = this.#perTenant.get(tenant) ?? 0;
    if (this.#total >= maxSessions) {
      throw new GatewayError(
        "session_limit",
        `Too many sessions: the gateway already serves ${this.#total}, the most MCP_MAX_SESSIONS ` +
          "allows; retry later, close sessions you no longer use (DELETE /mcp), or raise MCP_MAX_SESSIONS",
        { limit: "MCP_MAX_SESSIONS", max: maxSessions },
      );
    }
    if (held >= maxSessionsPerTenant) {
      throw new GatewayError(
        "session_limit",
        `Too many sessions for tenant "${tenant}": it holds ${held}, the most ` +
          "MCP_MAX_SESSIONS_PER_TENANT allows; close sessions you no longer use (DELETE /mcp) " +
          "or raise MCP_MAX_SESSIONS_PER_TENANT",
        { limit: "MCP_MAX_SESSIONS_PER_TENANT", max: maxSessionsPerTenant, tenant },
      );
    }
    this.#total++;
    this.#perTenant.set(tenant, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#total--;
      const left = (this.#perTenant.get(tenant) ?? 1) - 1;
      if (left > 0) this.#perTenant.set(tenant, left);
      else this.#perTenant.delete(tenant);
    };
  }
}

/**
 * The HTTP answer to a `session_limit` refusal: 503 with a JSON-RPC error -32000 body naming the
 * limit and how to raise it, and Retry-After (sessions free up as clients leave).
 */
export function sessionLimitResponse(error: GatewayError): Response {
  return Response.json(
    {
      jsonrpc: "2.0",
      id: null,
      error: { code: -32000, message: error.message, data: { code: error.code, ...error.data } },
    },
    { status: 503, headers: { "Retry-After": "5" } },
  );
}

/**
 * The JSON-RPC error for a request past MCP_MAX_IN_FLIGHT_PER_SESSION: -32000,
 * `too_many_requests`, naming the bound and how to raise it.
 */
export function tooManyRequestsError(max: number): {
  code: number;
  message: string;
  data: { code: "too_many_requests"; limit: "MCP_MAX_IN_FLIGHT_PER_SESSION"; max: number };
} {
  return {
    code: -32000,
    message: `Too many requests in flight on this session: ${max} are still waiting for their ` +
      "answers, the most MCP_MAX_IN_FLIGHT_PER_SESSION allows; wait for answers (or cancel " +
      "requests) before sending more, open another session, or raise MCP_MAX_IN_FLIGHT_PER_SESSION",
    data: { code: "too_many_requests", limit: "MCP_MAX_IN_FLIGHT_PER_SESSION", max },
  };
}
