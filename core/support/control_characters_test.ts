import assert from "node:assert/strict";
import { hasControlCharacter, plainText } from "./control_characters.ts";

Deno.test("hasControlCharacter finds C0 controls and DEL, and a tab unless allowed", () => {
  for (const text of ["a\nb", "a\rb", "a\u0000b", "a\u001fb", "a\u007fb", "a\tb"]) {
    assert.equal(hasControlCharacter(text), true, JSON.stringify(text));
  }
  assert.equal(hasControlCharacter("a\tb", true), false);
  assert.equal(hasControlCharacter("a\nb", true), true);
  assert.equal(hasControlCharacter("plain ünïcode €"), false);
});

Deno.test("plainText removes the colour codes of Deno's uncaught-error output", () => {
  const line =
    "\x1b[0m\x1b[1m\x1b[31merror\x1b[0m: Uncaught (in promise) NotCapable: Requires env " +
    'access to "X", run again with the --allow-env flag';
  assert.equal(
    plainText(line),
    'error: Uncaught (in promise) NotCapable: Requires env access to "X", run again with the --allow-env flag',
  );
  assert.equal(
    plainText("    \x1b[0m\x1b[2m\x1b[38;5;245mat \x1b[0m\x1b[0m\x1b[2mObject.getEnv\x1b[0m"),
    "    at Object.getEnv",
  );
});

Deno.test("plainText removes hyperlinks, titles, cursor moves and bare control characters", () => {
  assert.equal(plainText("\x1b]8;;https://x.example\x07link\x1b]8;;\x07"), "link");
  assert.equal(plainText("\x1b]0;title\x1b\\after"), "after");
  assert.equal(plainText("a\x1b[2Kb\x1b[1Ac\rd\x00e\x9b0mf\x07"), "abcdef");
  assert.equal(plainText("keeps\ttabs"), "keeps\ttabs");
});
