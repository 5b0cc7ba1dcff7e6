import assert from "node:assert/strict";
import { evaluateWhen, lookup, renderString, renderValue } from "./template.ts";

const scope = {
  inputs: { topic: "MCP", tags: ["a", "b"] },
  steps: { s1: { text: "done", ok: true } },
};

Deno.test("a placeholder names a dotted path into the scope", () => {
  assert.equal(lookup(scope, "steps.s1.text"), "done");
  assert.equal(lookup(scope, "steps.nope.text"), undefined);
});

Deno.test("a string that is one placeholder yields the value itself", () => {
  assert.deepEqual(renderString("{{ inputs.tags }}", scope), ["a", "b"]);
});

Deno.test("placeholders inside text are interpolated, missing ones as empty", () => {
  assert.equal(
    renderString("About {{inputs.topic}}: {{steps.s1.text}}{{x.y}}", scope),
    "About MCP: done",
  );
});

Deno.test("renderValue walks objects and lists", () => {
  assert.deepEqual(renderValue({ a: ["{{inputs.topic}}"], n: 1 }, scope), { a: ["MCP"], n: 1 });
});

Deno.test("when conditions: truthy path, not, == and !=", () => {
  assert.equal(evaluateWhen("{{steps.s1.ok}}", scope), true);
  assert.equal(evaluateWhen("not {{steps.s1.ok}}", scope), false);
  assert.equal(evaluateWhen("{{inputs.topic}} == MCP", scope), true);
  assert.equal(evaluateWhen("{{inputs.topic}} != 'MCP'", scope), false);
  assert.equal(evaluateWhen("{{steps.missing.ok}}", scope), false);
});
