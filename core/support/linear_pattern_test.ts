import assert from "node:assert/strict";
import { linearPattern, LinearPatternError, MAX_PROGRAM_SIZE } from "./linear_pattern.ts";

Deno.test("a pattern that makes a backtracking engine run for hours is matched in linear time", () => {
  // V8 takes seconds on 26 characters of this and doubles with each one more; RE2 is linear.
  const evil = linearPattern("^(a+)+$");
  const started = performance.now();
  assert.equal(evil.test("a".repeat(100_000) + "!"), false);
  assert.equal(evil.test("a".repeat(100_000)), true);
  assert.ok(performance.now() - started < 30_000, "linear, not exponential");
  const nested = linearPattern("^(\\w+\\s?)*$");
  assert.equal(nested.test("word ".repeat(20_000) + "!"), false);
});

Deno.test("a pattern searches the whole string, as JSON Schema's pattern does", () => {
  assert.equal(linearPattern("data").test("/srv/data/x"), true);
  assert.equal(linearPattern("^/data/").test("/srv/data/x"), false);
});

Deno.test("patterns keep their ECMAScript meaning", () => {
  const cases: [pattern: string, text: string][] = [
    ["^\\/data\\/[a-z0-9/]+$", "/data/x/1"],
    ["^\\u00e9$", "é"],
    ["^\\u{1F600}$", "😀"],
    ["^[\\u0041-\\u005A]+$", "ABC"],
    ["^(?<year>\\d{4})-(?<month>\\d{2})$", "2026-12"],
    ["^[\\w.-]+@[\\w.-]+\\.[a-z]{2,}$", "a.b@c.de"],
    ["^\\p{L}+$", "héllo"],
    ["^.$", "😀"],
    ["^.$", "\r"],
    ["^.$", "\u2028"],
    ["^\\s$", "\u00a0"],
    ["^\\s$", "\v"],
    ["^\\S$", "\u3000"],
    ["^[\\s\\d]+$", "1\u20032"],
    ["^[^]$", "\n"],
    ["\\bword\\b", "a word here"],
    ["^\\cJ$", "\n"],
    ["^(?:ab|cd){2,3}$", "abcdab"],
  ];
  for (const [pattern, text] of cases) {
    const native = new RegExp(pattern, "u").test(text);
    assert.equal(
      linearPattern(pattern).test(text),
      native,
      `${pattern} on ${JSON.stringify(text)}`,
    );
  }
});

Deno.test("a pattern that needs backtracking is refused, naming the construct and the fix", () => {
  for (
    const [pattern, construct] of [
      ["^(?=.*\\d)\\w+$", /lookaround, \(\?=/],
      ["(?<!x)y", /lookaround, \(\?<!/],
      ["^(a)\\1$", /backreference/],
      ["^(?<q>a)\\k<q>$", /backreference/],
    ] as const
  ) {
    assert.throws(() => linearPattern(pattern), (error: Error) => {
      assert.ok(error instanceof LinearPatternError);
      assert.match(error.message, construct);
      assert.match(error.message, /cannot be matched in linear time/);
      assert.match(error.message, /rewrite it in RE2's syntax/);
      return true;
    });
  }
});

Deno.test("a pattern that compiles to more than MAX_PROGRAM_SIZE RE2 instructions is refused, naming the size", () => {
  // Linear, but 47 s a megabyte: every character steps each of its 60,002 instructions.
  assert.throws(() => linearPattern("[a-z]{1000}".repeat(60)), (error: Error) => {
    assert.ok(error instanceof LinearPatternError);
    assert.match(error.message, new RegExp(`60002 RE2 instructions, over ${MAX_PROGRAM_SIZE}`));
    return true;
  });
  assert.equal(
    linearPattern("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$").test("x"),
    false,
  );
});
