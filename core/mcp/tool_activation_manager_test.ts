import assert from "node:assert/strict";
import { ToolActivationManager } from "./tool_activation_manager.ts";

Deno.test("ToolActivationManager keeps each session's activations apart", () => {
  const m = new ToolActivationManager();
  m.activate("s1", ["a", "b"]);
  m.activate("s2", ["c"]);
  assert.deepEqual(m.active("s1"), ["a", "b"]);
  assert.deepEqual(m.active("s2"), ["c"]);
  assert.equal(m.isActive("s2", "a"), false);
});

Deno.test("ToolActivationManager is bounded: the oldest activation makes room", () => {
  const m = new ToolActivationManager(2);
  m.activate("s", ["a", "b"]);
  assert.deepEqual(m.activate("s", ["c"]), { added: ["c"], evicted: ["a"] });
  assert.deepEqual(m.active("s"), ["b", "c"]);
});

Deno.test("ToolActivationManager reports only new activations and real deactivations", () => {
  const m = new ToolActivationManager();
  assert.deepEqual(m.activate("s", ["a"]).added, ["a"]);
  assert.deepEqual(m.activate("s", ["a"]).added, []);
  assert.deepEqual(m.deactivate("s", ["a", "zz"]), ["a"]);
  assert.deepEqual(m.deactivate("other", ["a"]), []);
});

Deno.test("ToolActivationManager forgets a session that ended", () => {
  const m = new ToolActivationManager();
  m.activate("s", ["a"]);
  m.forget("s");
  assert.deepEqual(m.active("s"), []);
  assert.equal(m.sessions, 0);
});

Deno.test("replace makes exactly the given tools active and says whether anything changed", () => {
  const manager = new ToolActivationManager(2);
  manager.activate("s", ["a"]);
  assert.equal(manager.replace("s", ["a"]), false);
  assert.equal(manager.replace("s", ["b", "c", "d"]), true);
  assert.deepEqual(manager.active("s"), ["c", "d"], "past the limit the last ones win");
  assert.equal(manager.replace("s", []), true);
  assert.equal(manager.sessions, 0);
});
