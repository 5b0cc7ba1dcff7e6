/**
 * The scripted model's script: a list of turns, each some text and/or tool calls. Turn N answers
 * the conversation's Nth model call, so a run is deterministic and needs no state in the plugin.
 * @module
 */
import { parse } from "yaml";
import type { ModelRequest, ModelResponse } from "../../core/plugin_api/mod.ts";

/** One scripted turn as written in the file. */
export interface ScriptTurn {
  text?: string;
  tool_calls?: { name: string; arguments?: Record<string, unknown> }[];
}

/** Parses a script (YAML or JSON: a list of turns); throws naming the file and the fix. */
export function parseScript(text: string, path: string): ScriptTurn[] {
  const turns = parse(text) as unknown;
  const valid = Array.isArray(turns) && turns.every((t) =>
    typeof t === "object" && t !== null &&
    (t.text === undefined || typeof t.text === "string") &&
    (t.tool_calls === undefined ||
      (Array.isArray(t.tool_calls) &&
        t.tool_calls.every((c: { name?: unknown }) => typeof c?.name === "string")))
  );
  if (!valid) {
    throw new Error(
      `${path}: a model script must be a list of { text, tool_calls: [{ name, arguments }] }`,
    );
  }
  return turns as ScriptTurn[];
}

/** The turn answering this request: the one after the assistant turns already in it. */
export function answer(turns: readonly ScriptTurn[], request: ModelRequest): ModelResponse {
  const index = request.messages.filter((m) => m.role === "assistant").length;
  const turn = turns[index];
  if (!turn) return { text: "(the script has no more turns)", toolCalls: [] };
  return {
    text: turn.text ?? "",
    toolCalls: (turn.tool_calls ?? []).map((c, i) => ({
      id: `call_${index}_${i}`,
      name: c.name,
      arguments: c.arguments ?? {},
    })),
  };
}
