/**
 * Runs a workflow: steps in order, each a governed tool call whose arguments are templated from the
 * inputs and earlier steps. A step needing approval stops the run (with the request id); a denied
 * or failed step stops it or is recorded and skipped past, per its `on_error`.
 * @module
 */
import type { ToolCallContext } from "../plugin_api/mod.ts";
import { GatewayError } from "../support/errors.ts";
import type { ApprovalSummary } from "../governance/tool_governance.ts";
import { evaluateWhen, renderString, renderValue } from "./template.ts";
import { resultText, type ToolInvoker } from "./tool_invoker.ts";
import type { WorkflowSpec } from "./workflow_loader.ts";

/** What one step did. */
export interface StepRecord {
  id: string;
  tool: string;
  status: "ok" | "error" | "denied" | "skipped" | "approval_required";
  text?: string;
  error?: string;
}

/** The outcome of a run. */
export interface WorkflowRunResult {
  workflow: string;
  status: "completed" | "failed" | "approval_required";
  steps: StepRecord[];
  output?: unknown;
  /** Set when a step waits for approval: retry workflow_run with the token in `_meta`. */
  approval?: { step: string; request: ApprovalSummary; reason: string };
}

/** Validates inputs against the declaration: required ones present, defaults applied. */
export function resolveInputs(
  spec: WorkflowSpec,
  given: Record<string, unknown>,
): Record<string, unknown> {
  const inputs: Record<string, unknown> = {};
  for (const input of spec.inputs) {
    const value = given[input.name] ?? input.default;
    if (value === undefined && input.required) {
      throw new GatewayError(
        "invalid_arguments",
        `Workflow "${spec.id}" needs the input "${input.name}" (${spec.source}); pass it in inputs`,
        { workflow: spec.id, input: input.name },
      );
    }
    if (value !== undefined) inputs[input.name] = value;
  }
  const unknown = Object.keys(given).filter((k) => !spec.inputs.some((i) => i.name === k));
  if (unknown.length > 0) {
    throw new GatewayError(
      "invalid_arguments",
      `Workflow "${spec.id}" has no input ${unknown.map((u) => `"${u}"`).join(", ")}; ` +
        `its inputs are ${spec.inputs.map((i) => i.name).join(", ") || "none"}`,
      { workflow: spec.id },
    );
  }
  return inputs;
}

/** Runs the workflow's steps for the caller of `context`. */
export async function runWorkflow(
  spec: WorkflowSpec,
  given: Record<string, unknown>,
  invoker: ToolInvoker,
  context: ToolCallContext,
  approvalToken?: string,
): Promise<WorkflowRunResult> {
  const inputs = resolveInputs(spec, given);
  const steps: Record<string, Record<string, unknown>> = {};
  const scope = { inputs, steps };
  const records: StepRecord[] = [];
  let failed = false;
  for (const step of spec.steps) {
    if (step.when !== undefined && !evaluateWhen(step.when, scope)) {
      records.push({ id: step.id, tool: step.tool, status: "skipped" });
      steps[step.id] = { skipped: true, ok: false, text: "" };
      continue;
    }
    const args = renderValue(step.arguments, scope) as Record<string, unknown>;
    const outcome = await invoker.invoke({
      name: step.tool,
      args,
      context,
      step: step.id,
      ...(approvalToken === undefined ? {} : { approvalToken }),
    });
    if (outcome.status === "approval_required") {
      records.push({ id: step.id, tool: step.tool, status: "approval_required" });
      return {
        workflow: spec.id,
        status: "approval_required",
        steps: records,
        approval: { step: step.id, request: outcome.request, reason: outcome.reason },
      };
    }
    if (outcome.status === "ok" && !outcome.result.isError) {
      const text = resultText(outcome.result);
      records.push({ id: step.id, tool: step.tool, status: "ok", text });
      steps[step.id] = {
        ok: true,
        text,
        result: outcome.result.structuredContent ?? parseJson(text),
        skipped: false,
      };
      continue;
    }
    const error = outcome.status === "ok"
      ? resultText(outcome.result)
      : `${outcome.code}: ${outcome.reason}`;
    records.push({
      id: step.id,
      tool: step.tool,
      status: outcome.status === "denied" ? "denied" : "error",
      error,
    });
    steps[step.id] = { ok: false, text: "", error, skipped: false };
    if (step.onError === "stop") {
      failed = true;
      break;
    }
  }
  if (failed) return { workflow: spec.id, status: "failed", steps: records };
  const last = records.findLast((r) => r.status === "ok");
  const output = spec.output === undefined ? last?.text : renderString(spec.output, scope);
  return {
    workflow: spec.id,
    status: "completed",
    steps: records,
    ...(output === undefined ? {} : { output }),
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
