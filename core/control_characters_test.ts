import assert from "node:assert/strict";
import { hasControlCharacter } from "./control_characters.ts";

Deno.test("hasControlCharacter finds C0 controls and DEL, and a tab unless allowed", () => {
  for (const text of ["a\nb", "a\rb", "a\u0000b", "a\u001fb", "a\u007fb", "a\tb"]) {
    assert.equal(hasControlCharacter(text), true, JSON.stringify(text));
  }
  assert.equal(hasControlCharacter("a\tb", true), false);
  assert.equal(hasControlCharacter("a\nb", true), true);
  assert.equal(hasControlCharacter("plain ünïcode €"), false);
});
