import assert from "node:assert/strict";
import { interpolate } from "./interpolate.ts";

/** Interpolates and returns the result with every missing name, in order. */
function run(text: string, env: Record<string, string | undefined> = {}) {
  const missing: string[] = [];
  const value = interpolate(text, env, (name) => missing.push(name));
  return { value, missing };
}

Deno.test("interpolate replaces ${VAR} with its value", () => {
  assert.deepEqual(run("Bearer ${TOKEN}", { TOKEN: "abc" }), { value: "Bearer abc", missing: [] });
});

Deno.test("interpolate replaces several references and keeps surrounding text", () => {
  assert.deepEqual(run("${SCHEME}://${HOST}:8080/${HOST}", { SCHEME: "https", HOST: "h" }), {
    value: "https://h:8080/h",
    missing: [],
  });
});

Deno.test("interpolate leaves text without references unchanged", () => {
  assert.deepEqual(run("plain text"), { value: "plain text", missing: [] });
  assert.deepEqual(run(""), { value: "", missing: [] });
});

Deno.test("interpolate uses the default of ${VAR:-default} when VAR is unset or empty", () => {
  assert.deepEqual(run("${PORT:-8080}"), { value: "8080", missing: [] });
  assert.deepEqual(run("${PORT:-8080}", { PORT: "" }), { value: "8080", missing: [] });
  assert.deepEqual(run("${PORT:-8080}", { PORT: "9090" }), { value: "9090", missing: [] });
});

Deno.test("interpolate allows an empty default and a default containing $ or :", () => {
  assert.deepEqual(run("[${A:-}]"), { value: "[]", missing: [] });
  assert.deepEqual(run("${A:-$5 a:b}"), { value: "$5 a:b", missing: [] });
});

Deno.test("interpolate takes an empty value for ${VAR} when VAR is set but empty", () => {
  assert.deepEqual(run("[${A}]", { A: "" }), { value: "[]", missing: [] });
});

Deno.test("interpolate reports each missing variable and keeps its reference as written", () => {
  assert.deepEqual(run("${A}-${B}-${A}", { B: "b" }), {
    value: "${A}-b-${A}",
    missing: ["A", "A"],
  });
});

Deno.test("interpolate turns $$ into a literal $ and does not expand after it", () => {
  assert.deepEqual(run("cost $$5 and $${HOME}", { HOME: "/root" }), {
    value: "cost $5 and ${HOME}",
    missing: [],
  });
});

Deno.test("interpolate keeps a lone $ that starts no reference", () => {
  assert.deepEqual(run("$HOME costs $5 $", { HOME: "/root" }), {
    value: "$HOME costs $5 $",
    missing: [],
  });
});

Deno.test("interpolate does not rescan substituted values", () => {
  assert.deepEqual(run("${A}", { A: "${B}", B: "no" }), { value: "${B}", missing: [] });
});

Deno.test("interpolate rejects an unclosed reference, quoting it", () => {
  assert.throws(() => run("Bearer ${TOKEN"), {
    name: "SyntaxError",
    message: 'Unclosed variable reference "${TOKEN"; close it with }, or write ${NAME} or ' +
      "${NAME:-default} (NAME is letters, digits and _), or $$ for a literal $",
  });
});

Deno.test("interpolate rejects malformed references, quoting them", () => {
  for (const bad of ["${}", "${1X}", "${A-b}", "${A:b}", "${A B}", "${A:-${B}}"]) {
    assert.throws(() => run(`x ${bad} y`), (error: unknown) => {
      assert.ok(error instanceof SyntaxError, bad);
      assert.match(error.message, /^Malformed variable reference "\$\{/, bad);
      return true;
    });
  }
});
