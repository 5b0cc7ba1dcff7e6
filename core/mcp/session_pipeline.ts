/**
 * The session pipeline: how one inbound session is built, composed once.
 *
 * A session's messages pass through stages, transport side first: the transport plugin's own
 * (direct requests, response tracking), the session gate (admission, shutdown refusals, the
 * in-flight bound), the tool-call lane, and last the SDK `Server` of the bridge, composed once
 * by `compose` (core/plugin_api/stage_pipeline.ts): nothing reassigns a transport's slot after
 * that. {@link SessionPipeline} is where every transport plugin's `serve` lands: it admits
 * the session at the gate, then has the bridge build its `Server` behind the composed stages.
 * @module
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { SessionStage } from "../plugin_api/session_stage.ts";
import type { ServedSession, SessionInfo } from "../plugin_api/mod.ts";
import type { SessionGate } from "./session_gate.ts";

/** Builds the bridge's session behind the composed stages (the bridge's `serve`). */
export type ServeComposed = (
  transport: Transport,
  info: SessionInfo,
  stages: readonly SessionStage[],
) => Promise<ServedSession>;

/** Where every inbound session is built: admitted at the gate, then served by the bridge. */
export class SessionPipeline {
  readonly #gate: SessionGate;
  readonly #serve: ServeComposed;

  /** `serve` is looked up on each session (the bridge's `serve`), so it can be replaced. */
  constructor(gate: SessionGate, serve: ServeComposed) {
    this.#gate = gate;
    this.#serve = serve;
  }

  /**
   * Serves a session over `transport` for an authenticated caller, the transport plugin's own
   * `stages` first; throws `session_limit` when the gate is full (before any `Server` is built).
   */
  async serve(
    transport: Transport,
    info: SessionInfo,
    stages: readonly SessionStage[] = [],
  ): Promise<ServedSession> {
    const gate = this.#gate.admit(info, transport);
    try {
      return await this.#serve(transport, info, [...stages, gate]);
    } catch (error) {
      gate.release();
      throw error;
    }
  }
}
