import assert from "node:assert/strict";
import { GatewayError } from "../support/errors.ts";
import {
  describe,
  formatPath,
  isMapping,
  parseYamlSource,
  ProblemList,
  suggest,
  type YamlSource,
} from "./yaml_source.ts";

const TEXT = `# comment
servers:
  - id: a
    tools:
      allow: [x, y]
  - id: b
`;

function source(text = TEXT, path = "f.yaml"): YamlSource {
  const problems = new ProblemList("test file", path);
  const parsed = parseYamlSource(text, path, problems);
  problems.throwIfAny();
  assert.ok(parsed);
  return parsed;
}

/** The problems thrown by `problems`; fails if it does not throw. */
function thrown(problems: ProblemList): GatewayError {
  try {
    problems.throwIfAny();
  } catch (error) {
    assert.ok(error instanceof GatewayError, String(error));
    return error;
  }
  assert.fail("expected problems to be thrown");
}

Deno.test("parseYamlSource gives the data and the line of a key, a list item and an enclosing node", () => {
  const { root, lineOf, path } = source();
  assert.equal(path, "f.yaml");
  assert.deepEqual(root, { servers: [{ id: "a", tools: { allow: ["x", "y"] } }, { id: "b" }] });
  assert.equal(lineOf([]), 2);
  assert.equal(lineOf(["servers"]), 2);
  assert.equal(lineOf(["servers", 1]), 6);
  assert.equal(lineOf(["servers", 0, "tools"]), 4);
  assert.equal(lineOf(["servers", 0, "tools", "allow", 1]), 5);
  // A missing field reports the nearest enclosing node.
  assert.equal(lineOf(["servers", 1, "command"]), 6);
  assert.equal(lineOf(["servers", 7]), 2);
});

Deno.test("parseYamlSource gives null for an empty file", () => {
  assert.equal(source("").root, null);
  assert.equal(source("# only a comment\n").lineOf(["x"]), 1);
});

Deno.test("parseYamlSource reports syntax errors as file:line:col and returns undefined", () => {
  const problems = new ProblemList("test file", "f.yaml");
  assert.equal(parseYamlSource("a: 1\nb: 2\na: 3\n", "f.yaml", problems), undefined);
  const error = thrown(problems);
  assert.deepEqual(error.data.problems, ["f.yaml:3:1: invalid YAML: Map keys must be unique"]);
});

Deno.test("ProblemList prefixes a problem with the path of the value and its line", () => {
  const src = source();
  const problems = new ProblemList("test file", "f.yaml");
  problems.add(src, ["servers", 0, "tools", "allow", 1], "is wrong");
  problems.add(src, [], "is empty");
  assert.equal(problems.size, 2);
  assert.deepEqual(thrown(problems).data.problems, [
    "f.yaml:2: the file is empty",
    "f.yaml:5: servers[0].tools.allow[1] is wrong",
  ]);
});

Deno.test("ProblemList throws config_invalid listing problems by file, then line", () => {
  const problems = new ProblemList("policy", "dir");
  problems.addAt("b.yaml", 9, "first seen");
  problems.addAt("a.yaml", 3, "second file");
  problems.addAt("b.yaml", 2, "same line, found first");
  problems.addAt("b.yaml", 2, "same line, found second", 7);
  const error = thrown(problems);
  assert.equal(error.code, "config_invalid");
  const expected = [
    "b.yaml:2: same line, found first",
    "b.yaml:2:7: same line, found second",
    "b.yaml:9: first seen",
    "a.yaml:3: second file",
  ];
  assert.deepEqual(error.data, { path: "dir", problems: expected });
  assert.equal(error.message, `Invalid policy "dir":\n  - ${expected.join("\n  - ")}`);
});

Deno.test("ProblemList does not throw without problems", () => {
  const problems = new ProblemList("policy", "dir");
  problems.throwIfAny();
  assert.equal(problems.size, 0);
});

Deno.test("ProblemList.unknownKey suggests the key meant, or lists the known keys", () => {
  const src = source("servers: []\nservres: 1\nzzz: 2\n");
  const problems = new ProblemList("test file", "f.yaml");
  problems.unknownKey(src, ["servres"], ["servers"], (close) => ` (${close} is a list)`);
  problems.unknownKey(src, ["zzz"], ["servers", "tools"]);
  assert.deepEqual(thrown(problems).data.problems, [
    'f.yaml:2: servres is not a known field; did you mean "servers" (servers is a list)?',
    "f.yaml:3: zzz is not a known field; known fields are servers, tools",
  ]);
});

Deno.test("suggest matches ignoring case, - and _ and unit suffixes, or within 2 edits", () => {
  assert.equal(suggest("Per-Minute", ["per_minute"]), "per_minute");
  assert.equal(suggest("max_length", ["maxLength"]), "maxLength");
  assert.equal(suggest("connect_ms", ["connect", "call"]), "connect");
  assert.equal(suggest("trasport", ["transport"]), "transport");
  assert.equal(suggest("destrutcive", ["read", "destructive"]), "destructive");
  assert.equal(suggest("only", ["allow", "deny"]), undefined);
  // Two edits turn any two-letter word into another: too short to be a suggestion.
  assert.equal(suggest("ab", ["cd"]), undefined);
});

Deno.test("formatPath writes keys with dots and indexes in brackets", () => {
  assert.equal(formatPath([]), "the file");
  assert.equal(formatPath(["tenants", "acme", "allow", 2]), "tenants.acme.allow[2]");
  assert.equal(formatPath(["cases", 0, "name"]), "cases[0].name");
});

Deno.test("formatPath quotes a key that is neither a name nor a glob", () => {
  assert.equal(formatPath(["rate_limits", "github__*"]), "rate_limits.github__*");
  assert.equal(
    formatPath(["resources", "rate_limits", "proxy://fs/*"]),
    'resources.rate_limits["proxy://fs/*"]',
  );
  assert.equal(formatPath(["headers", "Bad Name"]), 'headers["Bad Name"]');
});

Deno.test("describe names what was received as the reader wrote it", () => {
  assert.equal(describe(undefined), "nothing");
  assert.equal(describe(null), "an empty value");
  assert.equal(describe("x"), '"x"');
  assert.equal(describe([1]), "a list");
  assert.equal(describe({ a: 1 }), "a mapping");
  assert.equal(describe(3), "3");
  assert.equal(describe(false), "false");
});

Deno.test("isMapping is true only for mappings", () => {
  assert.equal(isMapping({}), true);
  assert.equal(isMapping([]), false);
  assert.equal(isMapping(null), false);
  assert.equal(isMapping("x"), false);
});
