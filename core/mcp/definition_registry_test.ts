import assert from "node:assert/strict";
import { type Definition, DefinitionRegistry } from "./definition_registry.ts";

const remember: Definition = {
  id: "remember",
  name: "Remember a fact",
  description: "",
  body: {},
};

Deno.test("A definition is found by its id, its name, or either in another case", () => {
  const registry = new DefinitionRegistry();
  registry.set(remember);
  for (const key of ["remember", "Remember a fact", "Remember", "REMEMBER A FACT"]) {
    assert.equal(registry.find(key)?.id, "remember", key);
  }
  assert.equal(registry.find("forget"), undefined);
});

Deno.test("An exact id wins over another definition's name", () => {
  const registry = new DefinitionRegistry();
  registry.set(remember);
  registry.set({ ...remember, id: "recall", name: "remember" });
  assert.equal(registry.find("remember")?.id, "remember");
  assert.equal(registry.find("Remember")?.id, "remember");
});
