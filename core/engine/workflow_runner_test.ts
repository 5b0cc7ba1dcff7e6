import assert from "node:assert/strict";
import { principalOf, type ToolCallContext } from "../plugin_api/mod.ts";
import type { InvokeOutcome, InvokeRequest, ToolInvoker } from "./tool_invoker.ts";
import { runWorkflow } from "./workflow_runner.ts";
import type { WorkflowSpec } from "./workflow_loader.ts";

const ctx = {
  auth: { tenant: "t", subject: "s", principal: principalOf("tokens_file", "s"), scopes: [] },
  signal: new AbortController().signal,
  progress: () => Promise.resolve(),
} satisfies ToolCallContext;

function invoker(outcomes: Record<string, InvokeOutcome>, calls: InvokeRequest[]): ToolInvoker {
  return {
    tools: () => [],
    invoke: (r) => {
      calls.push(r);
      return Promise.resolve(
        outcomes[r.name] ??
          { status: "ok", result: { content: [{ type: "text", text: `${r.name} done` }] } },
      );
    },
  };
}

const spec = (steps: WorkflowSpec["steps"]): WorkflowSpec => ({
  id: "w",
  name: "W",
  description: "d",
  inputs: [{ name: "x", required: true }],
  steps,
  source: "w.yaml",
});

Deno.test("a step's arguments read inputs and earlier steps' text", async () => {
  const calls: InvokeRequest[] = [];
  const result = await runWorkflow(
    spec([
      { id: "a", tool: "one", arguments: { v: "{{inputs.x}}" }, onError: "stop" },
      { id: "b", tool: "two", arguments: { v: "{{steps.a.text}}" }, onError: "stop" },
    ]),
    { x: 1 },
    invoker({}, calls),
    ctx,
  );
  assert.equal(result.status, "completed");
  assert.deepEqual(calls.map((c) => c.args), [{ v: 1 }, { v: "one done" }]);
  assert.equal(result.output, "two done");
});

Deno.test("a denied step stops the run with on_error: stop, and is passed with continue", async () => {
  const denied: InvokeOutcome = { status: "denied", code: "tool_denied", reason: "no" };
  const stop = await runWorkflow(
    spec([
      { id: "a", tool: "bad", arguments: {}, onError: "stop" },
      { id: "b", tool: "two", arguments: {}, onError: "stop" },
    ]),
    { x: 1 },
    invoker({ bad: denied }, []),
    ctx,
  );
  assert.equal(stop.status, "failed");
  assert.deepEqual(stop.steps.map((s) => s.status), ["denied"]);
  const go = await runWorkflow(
    spec([
      { id: "a", tool: "bad", arguments: {}, onError: "continue" },
      { id: "b", tool: "two", arguments: {}, when: "not {{steps.a.ok}}", onError: "stop" },
    ]),
    { x: 1 },
    invoker({ bad: denied }, []),
    ctx,
  );
  assert.equal(go.status, "completed");
  assert.deepEqual(go.steps.map((s) => s.status), ["denied", "ok"]);
});

Deno.test("a step needing approval stops the run with the request id", async () => {
  const request = {
    id: "req-1",
    tool: "del",
    tenant: "t",
    effect: "destructive" as const,
    argumentsHash: "h",
    expiresAt: 0,
  };
  const result = await runWorkflow(
    spec([{ id: "a", tool: "del", arguments: {}, onError: "continue" }]),
    { x: 1 },
    invoker({ del: { status: "approval_required", reason: "needs approval", request } }, []),
    ctx,
  );
  assert.equal(result.status, "approval_required");
  assert.equal(result.approval?.request.id, "req-1");
  assert.equal(result.approval?.step, "a");
});

Deno.test("a when condition that is false skips the step", async () => {
  const calls: InvokeRequest[] = [];
  const result = await runWorkflow(
    spec([{ id: "a", tool: "one", arguments: {}, when: "{{inputs.x}} == 2", onError: "stop" }]),
    { x: 1 },
    invoker({}, calls),
    ctx,
  );
  assert.deepEqual(result.steps.map((s) => s.status), ["skipped"]);
  assert.equal(calls.length, 0);
});
