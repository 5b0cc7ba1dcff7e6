/**
 * The agent loop: the model proposes tool calls, each goes through the ToolInvoker (governance for
 * the caller's tenant, recorded as the agent) and the agent's own tool globs, results go back,
 * until the model answers without tool calls or the step budget runs out. A call that needs
 * approval pauses the run; its state is kept so a retry with the token resumes it.
 * @module
 */
import { GatewayError } from "../support/errors.ts";
import { compileGlobs } from "../support/glob.ts";
import type { ApprovalSummary } from "../governance/tool_governance.ts";
import {
  type ChatMessage,
  type ModelToolCall,
  sameCaller,
  type ToolCallContext,
} from "../plugin_api/mod.ts";
import type { AgentSpec } from "./agent_loader.ts";
import type { ModelRouter } from "./model_router.ts";
import { resultText, type ToolInvoker } from "./tool_invoker.ts";

/** How a run ended (or paused). */
export interface AgentRunResult {
  run: string;
  agent: string;
  status: "completed" | "approval_required" | "max_steps";
  text: string;
  steps: number;
  /** Each tool call made, in order. */
  calls: { tool: string; status: string }[];
  /** Set when paused: approve the request, then call agent_invoke again with the token in _meta. */
  approval?: { tool: string; request: ApprovalSummary; reason: string };
}

interface RunState {
  id: string;
  agent: AgentSpec;
  tenant: string;
  /** Who started the run: only the same caller may resume it. */
  principal: string;
  messages: ChatMessage[];
  steps: number;
  calls: { tool: string; status: string }[];
  /** Calls of the last model turn not yet made; the first is the one awaiting approval. */
  pending: ModelToolCall[];
}

/** Paused runs kept in all; past it, the caller holding the most gives up its oldest. */
export const MAX_PAUSED = 1024;
/** Paused runs one caller keeps; past it, that caller's oldest makes room. */
export const MAX_PAUSED_PER_CALLER = 64;

/** Runs agents and keeps paused runs until they are resumed. */
export class AgentRunner {
  readonly #router: ModelRouter;
  readonly #invoker: ToolInvoker;
  readonly #paused = new Map<string, RunState>();

  constructor(router: ModelRouter, invoker: ToolInvoker) {
    this.#router = router;
    this.#invoker = invoker;
  }

  /** Starts a run of `agent` on `prompt` for the caller of `context`. */
  start(agent: AgentSpec, prompt: string, context: ToolCallContext): Promise<AgentRunResult> {
    const state: RunState = {
      id: crypto.randomUUID(),
      agent,
      tenant: context.auth.tenant,
      principal: context.auth.principal,
      messages: [{ role: "user", content: prompt }],
      steps: 0,
      calls: [],
      pending: [],
    };
    return this.#loop(state, context, undefined);
  }

  /** Resumes a paused run (by id, else the caller's latest paused run of `agent`) with a token. */
  resume(
    agent: string,
    run: string | undefined,
    token: string,
    context: ToolCallContext,
  ): Promise<AgentRunResult> {
    const mine = (s: RunState) => sameCaller(s, context.auth);
    const state = run !== undefined
      ? this.#paused.get(run)
      : [...this.#paused.values()].findLast((s) => mine(s) && s.agent.id === agent);
    if (!state || !mine(state)) {
      throw new GatewayError(
        "not_found",
        `No paused run${run ? ` "${run}"` : ""} of agent "${agent}" for this caller; ` +
          "start a new one with a prompt",
        { agent, ...(run ? { run } : {}) },
      );
    }
    this.#paused.delete(state.id);
    return this.#loop(state, context, token);
  }

  async #loop(
    state: RunState,
    context: ToolCallContext,
    token: string | undefined,
  ): Promise<AgentRunResult> {
    const { agent } = state;
    const allowed = compileGlobs(agent.tools);
    const paused = await this.#callTools(state, context, allowed, token);
    if (paused) return paused;
    const { provider, model } = this.#router.resolve(agent.model, agent.source);
    const tools = this.#invoker.tools().filter((t) => allowed(t.name)).map((t) => ({
      name: t.name,
      ...(t.description === undefined ? {} : { description: t.description }),
      inputSchema: t.inputSchema as Record<string, unknown>,
    }));
    let last = "";
    while (state.steps < agent.maxSteps) {
      state.steps++;
      const response = await provider.complete({
        ...(model === undefined ? {} : { model }),
        system: agent.system,
        messages: state.messages,
        tools,
        maxTokens: 1024,
        signal: context.signal,
        ...(context.sample ? { sample: context.sample } : {}),
      });
      last = response.text;
      if (response.toolCalls.length === 0) {
        state.messages.push({ role: "assistant", content: response.text });
        return this.#result(state, "completed", response.text);
      }
      state.messages.push({
        role: "assistant",
        content: response.text,
        toolCalls: response.toolCalls,
      });
      state.pending = [...response.toolCalls];
      const pausedNow = await this.#callTools(state, context, allowed, undefined);
      if (pausedNow) return pausedNow;
    }
    return this.#result(state, "max_steps", last);
  }

  /** Makes the pending calls in order; returns a paused result when one needs approval. */
  async #callTools(
    state: RunState,
    context: ToolCallContext,
    allowed: (name: string) => boolean,
    token: string | undefined,
  ): Promise<AgentRunResult | undefined> {
    while (state.pending.length > 0) {
      const call = state.pending[0]!;
      let content: string;
      let status: string;
      if (!allowed(call.name)) {
        status = "not_allowed";
        content = `Tool "${call.name}" is not in agent "${state.agent.id}"'s tools ` +
          `(${state.agent.source}); use one of the offered tools`;
      } else {
        const outcome = await this.#invoker.invoke({
          name: call.name,
          args: call.arguments,
          context,
          agent: state.agent.id,
          ...(token === undefined ? {} : { approvalToken: token }),
        });
        if (outcome.status === "approval_required") {
          this.#keep(state);
          return {
            ...this.#result(state, "approval_required", ""),
            approval: { tool: call.name, request: outcome.request, reason: outcome.reason },
          };
        }
        status = outcome.status === "ok"
          ? (outcome.result.isError ? "tool_error" : "ok")
          : outcome.status === "denied"
          ? outcome.code
          : "error";
        content = outcome.status === "ok"
          ? resultText(outcome.result)
          : `${outcome.code}: ${outcome.reason}`;
      }
      state.calls.push({ tool: call.name, status });
      state.messages.push({ role: "tool", toolCallId: call.id, content });
      state.pending.shift();
    }
    return undefined;
  }

  #keep(state: RunState): void {
    // An abandoned run must not hold memory forever, and one caller's runs must not push out
    // another's: room is made among the runs of the caller filing, or of the one holding most.
    const byCaller = new Map<string, RunState[]>();
    for (const run of this.#paused.values()) {
      const key = callerKey(run);
      byCaller.get(key)?.push(run) ?? byCaller.set(key, [run]);
    }
    const own = byCaller.get(callerKey(state)) ?? [];
    if (own.length >= MAX_PAUSED_PER_CALLER) {
      this.#paused.delete(own[0]!.id);
    } else if (this.#paused.size >= MAX_PAUSED) {
      const most = [...byCaller.values()].reduce((a, b) => b.length > a.length ? b : a);
      this.#paused.delete(most[0]!.id);
    }
    this.#paused.set(state.id, state);
  }

  #result(state: RunState, status: AgentRunResult["status"], text: string): AgentRunResult {
    return {
      run: state.id,
      agent: state.agent.id,
      status,
      text,
      steps: state.steps,
      calls: [...state.calls],
    };
  }
}

/** Who a paused run belongs to, as one string (its tenant and principal). */
function callerKey(run: RunState): string {
  return JSON.stringify([run.tenant, run.principal]);
}
