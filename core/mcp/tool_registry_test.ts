import assert from "node:assert/strict";
import type { NativeTool } from "../plugin_api/mod.ts";
import { ToolRegistry } from "./tool_registry.ts";

function tool(name: string, inputSchema: NativeTool["inputSchema"] = { type: "object" }) {
  return {
    name,
    description: `the ${name} tool`,
    inputSchema,
    handler: () => Promise.resolve({ content: [] }),
  } satisfies NativeTool;
}

const ADD_SCHEMA: NativeTool["inputSchema"] = {
  type: "object",
  properties: { a: { type: "number" }, b: { type: "number" } },
  required: ["a", "b"],
};

Deno.test("ToolRegistry.register makes the tool available through has, get and size", () => {
  const registry = new ToolRegistry();
  const echo = tool("echo");
  registry.register(echo);
  assert.equal(registry.has("echo"), true);
  assert.equal(registry.get("echo"), echo);
  assert.equal(registry.size, 1);
  assert.equal(registry.has("other"), false);
  assert.equal(registry.get("other"), undefined);
});

Deno.test("ToolRegistry.list returns descriptors in registration order without handlers", () => {
  const registry = new ToolRegistry();
  registry.register(tool("zeta"));
  registry.register(tool("alpha", ADD_SCHEMA));
  assert.deepEqual(registry.list(), [
    { name: "zeta", description: "the zeta tool", inputSchema: { type: "object" } },
    { name: "alpha", description: "the alpha tool", inputSchema: ADD_SCHEMA },
  ]);
  for (const descriptor of registry.list()) assert.ok(!("handler" in descriptor));
});

Deno.test("ToolRegistry.register rejects an invalid name with a TypeError", () => {
  const registry = new ToolRegistry();
  for (const name of ["", "has space", "slash/name", "ünicode", "x".repeat(129)]) {
    assert.throws(() => registry.register(tool(name)), TypeError, `accepted ${name}`);
  }
  assert.equal(registry.size, 0);
});

Deno.test("ToolRegistry.register accepts letters, digits, _, - and . up to 128 characters", () => {
  const registry = new ToolRegistry();
  registry.register(tool("Fleet_01.get-status"));
  registry.register(tool("x".repeat(128)));
  assert.equal(registry.size, 2);
});

Deno.test("ToolRegistry.register rejects a duplicate name with a TypeError and keeps the first", () => {
  const registry = new ToolRegistry();
  const first = tool("echo");
  registry.register(first);
  assert.throws(() => registry.register(tool("echo")), TypeError);
  assert.equal(registry.get("echo"), first);
  assert.equal(registry.size, 1);
});

Deno.test("ToolRegistry.register rejects an inputSchema that is not valid JSON Schema", () => {
  const registry = new ToolRegistry();
  const bad = { type: "object", properties: { a: { type: "nope" } } } as never;
  assert.throws(() => registry.register(tool("bad", bad)), (error: unknown) => {
    assert.ok(error instanceof TypeError);
    assert.match(error.message, /"bad".*not valid JSON Schema/);
    return true;
  });
  assert.equal(registry.has("bad"), false);
});

Deno.test("ToolRegistry.onChange fires when a tool is registered", () => {
  const registry = new ToolRegistry();
  let changes = 0;
  registry.onChange(() => changes++);
  registry.register(tool("echo"));
  assert.equal(changes, 1);
});

Deno.test("ToolRegistry.onChange returns a function that stops notifications", () => {
  const registry = new ToolRegistry();
  let changes = 0;
  const off = registry.onChange(() => changes++);
  off();
  registry.register(tool("echo"));
  assert.equal(changes, 0);
});

Deno.test("ToolRegistry.register returns an unregister that removes the tool and fires onChange once", () => {
  const registry = new ToolRegistry();
  const unregister = registry.register(tool("echo"));
  let changes = 0;
  registry.onChange(() => changes++);
  unregister();
  assert.equal(registry.has("echo"), false);
  assert.equal(registry.size, 0);
  assert.equal(changes, 1);
  unregister();
  assert.equal(changes, 1);
});

Deno.test("ToolRegistry unregister is a no-op once the name was registered again", () => {
  const registry = new ToolRegistry();
  const staleUnregister = registry.register(tool("echo"));
  staleUnregister();
  const fresh = tool("echo");
  registry.register(fresh);
  let changes = 0;
  registry.onChange(() => changes++);
  staleUnregister();
  assert.equal(registry.get("echo"), fresh);
  assert.equal(changes, 0);
});
