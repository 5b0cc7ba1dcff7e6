import assert from "node:assert/strict";
import { compileAllowDeny, compileGlob } from "./glob.ts";

Deno.test("compileGlob matches * as any run and ? as one character", () => {
  const m = compileGlob("github__*_issue?");
  assert.equal(m("github__create_issues"), true);
  assert.equal(m("github__x_issue"), false);
  assert.equal(m("gitlab__create_issues"), false);
});

Deno.test("compileGlob treats regex characters literally", () => {
  assert.equal(compileGlob("a.b+(c)")("a.b+(c)"), true);
  assert.equal(compileGlob("a.b")("axb"), false);
});

Deno.test("compileAllowDeny: deny wins, and any allow glob turns on allowlist semantics", () => {
  const open = compileAllowDeny([], ["delete_*"]);
  assert.equal(open("read_file"), true);
  assert.equal(open("delete_file"), false);
  const listed = compileAllowDeny(["read_*", "delete_*"], ["delete_all"]);
  assert.equal(listed("read_file"), true);
  assert.equal(listed("write_file"), false);
  assert.equal(listed("delete_file"), true);
  assert.equal(listed("delete_all"), false);
});

Deno.test("compileGlob accepts hyphens, as in everything__get-env", () => {
  assert.equal(compileGlob("everything__get-*")("everything__get-env"), true);
  assert.equal(compileGlob("a-b")("a-b"), true);
});

Deno.test("compileGlob matches several stars, empty pieces and ? by code point", () => {
  assert.equal(compileGlob("a*b*c")("abc"), true);
  assert.equal(compileGlob("a*b*c")("axxbyyc"), true);
  assert.equal(compileGlob("a*b*c")("axxbyy"), false);
  assert.equal(compileGlob("**")(""), true);
  assert.equal(compileGlob("a*a")("a"), false);
  assert.equal(compileGlob("*ab*ab*")("abab"), true);
  assert.equal(compileGlob("*ab*ab*")("aba"), false);
  assert.equal(compileGlob("x?y")("x😀y"), true);
  assert.equal(compileGlob("*?")(""), false);
});

Deno.test("compileGlob does not backtrack: a 40 KB name against a multi-star glob answers", () => {
  const name = "a".repeat(40_000);
  assert.equal(compileGlob("*a*a*a*b")(name), false);
  assert.equal(compileGlob("*a*a*a*")(name), true);
});
