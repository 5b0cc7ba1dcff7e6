import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { GatewayError } from "../support/errors.ts";
import type { GlobRule, PolicySet, TenantPolicy } from "./policy.ts";
import {
  DEFAULT_POLICY,
  loadPolicies,
  parsePolicies,
  parsePolicyTests,
  type PolicyFile,
  type PolicyFileAccess,
  policyTestFiles,
} from "./policy_loader.ts";

const POLICIES = fileURLToPath(new URL("../../policies", import.meta.url));

function parse(text: string, path = "p.yaml"): PolicySet {
  return parsePolicies([{ path, text }]);
}

/** The `config_invalid` error `fn` throws; fails if it returns. */
function rejection(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof GatewayError, String(error));
    assert.equal(error.code, "config_invalid");
    return error;
  }
  assert.fail("expected the policy to be rejected");
}

/** The problems policy files are rejected with. */
function problemsOf(files: string | PolicyFile[]): unknown {
  const list = typeof files === "string" ? [{ path: "p.yaml", text: files }] : files;
  return rejection(() => parsePolicies(list)).data.problems;
}

/** The problems a policy test file is rejected with. */
function testProblemsOf(text: string): unknown {
  return rejection(() => parsePolicyTests(text, "t.test.yaml")).data.problems;
}

function tenant(policy: PolicySet, name: string): TenantPolicy {
  const found = policy.tenants.get(name);
  assert.ok(found, `tenant ${name}`);
  return found;
}

/** A rule without its matcher, which deepEqual cannot compare. */
function plain<T extends GlobRule>({ match: _, ...rest }: T): Omit<T, "match"> {
  return rest;
}

/** An in-memory file tree: `readDir` and `readTextFile` that fail as Deno's do. */
function fakeFs(files: Record<string, string>): Required<PolicyFileAccess> {
  const dirs = new Set<string>(["."]);
  for (const path of Object.keys(files)) {
    for (let i = path.indexOf("/"); i > 0; i = path.indexOf("/", i + 1)) dirs.add(path.slice(0, i));
  }
  return {
    async *readDir(path) {
      if (Object.hasOwn(files, path)) throw new Deno.errors.NotADirectory(path);
      if (!dirs.has(path)) throw new Deno.errors.NotFound(path);
      const prefix = path === "." ? "" : `${path}/`;
      const names = new Set<string>();
      for (const file of [...Object.keys(files), ...dirs]) {
        if (file !== "." && file.startsWith(prefix)) {
          names.add(file.slice(prefix.length).split("/")[0]!);
        }
      }
      for (const name of names) {
        const isDirectory = dirs.has(prefix + name);
        yield { name, isFile: !isDirectory, isDirectory, isSymlink: false };
      }
    },
    readTextFile(path) {
      const text = files[path];
      return text === undefined
        ? Promise.reject(new Deno.errors.NotFound(path))
        : Promise.resolve(text);
    },
  };
}

const EXAMPLE = `tenants:
  "*":
    approval: []
  acme:
    allow: ["github__*", "system_status"]
    deny:
      - "github__delete_*"
    effects:
      "github__create_*": write
      "memory__delete_*": destructive
    approval: [destructive, write]
    arguments:
      fs__write_file:
        path: { pattern: "^/data/" }
      github__list_issues:
        per_page: { maximum: 50 }
        state: { enum: [open, closed] }
    rate_limits:
      "github__*": { per_minute: 60, burst: 10 }
      "memory__*": { per_minute: 5 }
connectors:
  github:
    tenants: [acme]
    effects: [read, write]
  memory: { tenants: "*", effects: [read] }
`;

Deno.test("parsePolicies compiles every rule with the file:line and text it came from", () => {
  const policy = parse(EXAMPLE);
  assert.deepEqual(policy.files, ["p.yaml"]);
  assert.deepEqual([...policy.tenants.keys()], ["*", "acme"]);
  const acme = tenant(policy, "acme");
  const at = (line: number, text: string) => ({ file: "p.yaml", line, text });
  assert.deepEqual(acme.allow.map(plain), [
    { glob: "github__*", source: at(5, 'allow "github__*"') },
    { glob: "system_status", source: at(5, 'allow "system_status"') },
  ]);
  assert.deepEqual(acme.deny.map(plain), [
    { glob: "github__delete_*", source: at(7, 'deny "github__delete_*"') },
  ]);
  assert.deepEqual(acme.effects.map(plain), [
    { glob: "github__create_*", effect: "write", source: at(9, "effect github__create_* = write") },
    {
      glob: "memory__delete_*",
      effect: "destructive",
      source: at(10, "effect memory__delete_* = destructive"),
    },
  ]);
  assert.deepEqual(acme.approval, new Set(["write", "destructive"]));
  assert.deepEqual(acme.source, at(11, "approval [write, destructive]"));
  assert.deepEqual(acme.arguments.map(plain), [
    {
      glob: "fs__write_file",
      schema: { type: "object", properties: { path: { pattern: "^/data/" } } },
      source: at(13, "arguments fs__write_file (path)"),
    },
    {
      glob: "github__list_issues",
      schema: {
        type: "object",
        properties: { per_page: { maximum: 50 }, state: { enum: ["open", "closed"] } },
      },
      source: at(15, "arguments github__list_issues (per_page, state)"),
    },
  ]);
  assert.deepEqual(acme.rateLimits.map(plain), [
    {
      glob: "github__*",
      perMinute: 60,
      burst: 10,
      source: at(19, "rate_limit github__* 60/min burst 10"),
    },
    {
      glob: "memory__*",
      perMinute: 5,
      burst: 5,
      source: at(20, "rate_limit memory__* 5/min burst 5"),
    },
  ]);
  assert.deepEqual([...policy.connectors.values()], [
    {
      server: "github",
      source: at(22, "connector github"),
      tenants: ["acme"],
      effects: new Set(["read", "write"]),
    },
    {
      server: "memory",
      source: at(25, "connector memory"),
      tenants: "*",
      effects: new Set(["read"]),
    },
  ]);
});

Deno.test("parsePolicies compiles globs into matchers", () => {
  const acme = tenant(parse(EXAMPLE), "acme");
  assert.equal(acme.allow[0]?.match("github__list_issues"), true);
  assert.equal(acme.allow[0]?.match("gitlab__list_issues"), false);
  assert.equal(acme.deny[0]?.match("github__delete_repo"), true);
});

Deno.test("parsePolicies: approval [] disables approval", () => {
  const star = tenant(parse(EXAMPLE), "*");
  assert.deepEqual(star.approval, new Set());
  assert.deepEqual(star.source, { file: "p.yaml", line: 3, text: "approval []" });
});

Deno.test("parsePolicies: approval defaults to destructive, sourced at the tenant's line", () => {
  const policy = parse("tenants:\n  acme:\n    deny: [x]\n  beta:\n");
  assert.deepEqual(tenant(policy, "acme").approval, new Set(["destructive"]));
  assert.deepEqual(tenant(policy, "acme").source, {
    file: "p.yaml",
    line: 2,
    text: "approval [destructive] (default)",
  });
  // A tenant with every rule commented out is left at the defaults.
  assert.deepEqual(tenant(policy, "beta").allow, []);
});

Deno.test("parsePolicies adds no tenant * when files define tenants without one (tenant allowlist)", () => {
  const policy = parse("tenants:\n  acme:\n    deny: [x]\n");
  assert.deepEqual([...policy.tenants.keys()], ["acme"]);
});

Deno.test("parsePolicies with no files gives the built-in tenant *", () => {
  assert.deepEqual(tenant(parsePolicies([]), "*"), tenant(DEFAULT_POLICY, "*"));
});

Deno.test("parsePolicies accepts empty files and empty sections", () => {
  const policy = parsePolicies([
    { path: "a.yaml", text: "" },
    { path: "b.yaml", text: "tenants:\nconnectors:\n" },
  ]);
  assert.deepEqual([...policy.tenants.keys()], []);
  assert.equal(policy.connectors.size, 0);
  assert.deepEqual(policy.files, ["a.yaml", "b.yaml"]);
});

Deno.test("DEFAULT_POLICY allows every tool and needs approval for destructive calls", () => {
  assert.deepEqual([...DEFAULT_POLICY.tenants.keys()], ["*"]);
  const star = tenant(DEFAULT_POLICY, "*");
  assert.deepEqual(
    { allow: star.allow, deny: star.deny, effects: star.effects, approval: star.approval },
    { allow: [], deny: [], effects: [], approval: new Set(["destructive"]) },
  );
  assert.deepEqual(star.source, {
    file: "(built-in default)",
    line: 0,
    text: "approval [destructive]",
  });
  assert.equal(DEFAULT_POLICY.connectors.size, 0);
  assert.deepEqual(DEFAULT_POLICY.files, []);
});

Deno.test("loadPolicies gives the default for a missing path or a directory without policy files", async () => {
  const fs = fakeFs({ "empty/only.test.yaml": "cases: []\n", "empty/notes.md": "x" });
  assert.equal(await loadPolicies("nowhere", fs), DEFAULT_POLICY);
  assert.equal(await loadPolicies("empty", fs), DEFAULT_POLICY);
});

Deno.test("loadPolicies reads a directory's .yaml and .yml files in name order, not tests or dotfiles", async () => {
  const fs = fakeFs({
    "pol/b.yml": "tenants:\n  beta: {}\n",
    "pol/a.yaml": "tenants:\n  acme: {}\n",
    "pol/a.test.yaml": "not: [policy\n",
    "pol/a.test.yml": "not: [policy\n",
    "pol/.#a.yaml": "not: [policy\n",
    "pol/README.md": "# not policy\n",
    "pol/sub/c.yaml": "not: [policy\n",
  });
  const policy = await loadPolicies("pol", fs);
  assert.deepEqual(policy.files, ["pol/a.yaml", "pol/b.yml"]);
  assert.deepEqual([...policy.tenants.keys()], ["acme", "beta"]);
});

Deno.test("loadPolicies reads a single file", async () => {
  const fs = fakeFs({ "rules.yaml": "tenants:\n  acme: {}\n" });
  const policy = await loadPolicies("rules.yaml", fs);
  assert.deepEqual(policy.files, ["rules.yaml"]);
  assert.equal(tenant(policy, "acme").source.file, "rules.yaml");
});

Deno.test("loadPolicies names the directory read and every file's problems", async () => {
  const fs = fakeFs({ "pol/a.yaml": "tenants: []\n", "pol/b.yaml": "connectors: 3\n" });
  const error = await loadPolicies("pol", fs).then(
    () => assert.fail("expected a rejection"),
    (error: unknown) => error,
  );
  assert.ok(error instanceof GatewayError);
  assert.deepEqual(error.data, {
    path: "pol",
    problems: [
      "pol/a.yaml:1: tenants must be a mapping of tenant names to rules, received a list",
      "pol/b.yaml:1: connectors must be a mapping of server ids to connector rules, received 3",
    ],
  });
  assert.match(error.message, /^Invalid policy "pol":\n {2}- pol\/a\.yaml:1: /);
});

Deno.test("loadPolicies reports a policy it cannot read as config_invalid", async () => {
  const error = await loadPolicies("pol", {
    readDir: () => ({
      [Symbol.asyncIterator]: () => ({
        next: () => Promise.reject(new Deno.errors.PermissionDenied("denied")),
      }),
    }),
  }).then(() => assert.fail("expected a rejection"), (error: unknown) => error);
  assert.ok(error instanceof GatewayError);
  assert.equal(error.code, "config_invalid");
  assert.equal(error.message, 'Cannot read policy "pol": denied; check MCP_POLICY_PATH');
});

Deno.test("parsePolicies rejects unknown keys at every level, suggesting the key meant", () => {
  assert.deepEqual(
    problemsOf(`tenant: {}
tenants:
  acme:
    alow: [x]
    rate_limits:
      x: { perMinute: 5 }
    arguments:
      x:
        a: { max_length: 3, type: string }
connectors:
  github: { tenants: "*", effect: [read] }
`),
    [
      'p.yaml:1: tenant is not a known field; did you mean "tenants"?',
      'p.yaml:4: tenants.acme.alow is not a known field; did you mean "allow"?',
      'p.yaml:6: tenants.acme.rate_limits.x.perMinute is not a known field; did you mean "per_minute"?',
      "p.yaml:6: tenants.acme.rate_limits.x.per_minute is required, e.g. per_minute: 60",
      'p.yaml:9: tenants.acme.arguments.x.a.max_length is not a known field; did you mean "maxLength"?',
      "p.yaml:9: tenants.acme.arguments.x.a.type is not a known field; known fields are pattern, " +
      "enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, " +
      "minItems, maxItems, format, items",
      'p.yaml:11: connectors.github.effect is not a known field; did you mean "effects"?',
      "p.yaml:11: connectors.github.effects is required: list the effect classes allowed through " +
      "github, e.g. [read, write]",
    ],
  );
});

Deno.test("parsePolicies rejects wrong types with what was received", () => {
  assert.deepEqual(problemsOf("- tenants\n"), [
    "p.yaml:1: the file must be a mapping with tenants and/or connectors, received a list",
  ]);
  assert.deepEqual(
    problemsOf(`tenants:
  acme:
    allow: "github__*"
    deny:
    effects: [x]
    arguments: 1
    rate_limits: { "x": 60 }
  beta: [x]
`),
    [
      'p.yaml:3: tenants.acme.allow must be a list of tool-name globs, e.g. ["github__*"], received "github__*"',
      'p.yaml:4: tenants.acme.deny must be a list of tool-name globs, e.g. ["github__*"], received an empty value',
      "p.yaml:5: tenants.acme.effects must be a mapping of tool-name globs to effect classes, received a list",
      "p.yaml:6: tenants.acme.arguments must be a mapping of tool-name globs to argument rules, received 1",
      "p.yaml:7: tenants.acme.rate_limits.x must be a mapping like { per_minute: 60, burst: 10 }, received 60",
      "p.yaml:8: tenants.beta must be a mapping of rules (allow, deny, effects, approval, arguments, " +
      "rate_limits, discovery, always_active, resources, prompts), received a list",
    ],
  );
});

Deno.test("parsePolicies rejects effect classes other than read, write and destructive", () => {
  assert.deepEqual(
    problemsOf(`tenants:
  acme:
    effects: { "x_*": delete, y: Write }
    approval: [destrutcive]
    deny: [x]
connectors:
  github: { tenants: "*", effects: [read, admin] }
`),
    [
      'p.yaml:3: tenants.acme.effects.x_* must be read, write or destructive, received "delete"',
      'p.yaml:3: tenants.acme.effects.y must be read, write or destructive, received "Write"; did you mean "write"?',
      'p.yaml:4: tenants.acme.approval[0] must be read, write or destructive, received "destrutcive"; did you mean "destructive"?',
      'p.yaml:7: connectors.github.effects[1] must be read, write or destructive, received "admin"',
    ],
  );
  assert.deepEqual(problemsOf("tenants:\n  acme:\n    approval: destructive\n"), [
    "p.yaml:3: tenants.acme.approval must be a list of effect classes (read, write, destructive), " +
    'e.g. [destructive], or [] for none, or who approves (operator or in_band), received "destructive"; ' +
    "write [destructive]",
  ]);
});

Deno.test("parsePolicies rejects globs that are empty, not strings, or could never match a tool name", () => {
  assert.deepEqual(
    problemsOf(`tenants:
  acme:
    allow:
      - ""
      - 42
      - "github/*"
    deny: ["git hub*", "ok_*"]
    effects:
      "a b": read
`),
    [
      'p.yaml:4: tenants.acme.allow[0] must not be empty; write a tool-name glob such as "github__*"',
      'p.yaml:5: tenants.acme.allow[1] must be a tool-name glob, received 42; quote it: "42"',
      'p.yaml:6: tenants.acme.allow[2] "github/*" is not a valid tool-name glob: it contains "/"; ' +
      "tool names use letters, digits, _ . and -, with * and ? as wildcards",
      'p.yaml:7: tenants.acme.deny[0] "git hub*" is not a valid tool-name glob: it contains " "; ' +
      "tool names use letters, digits, _ . and -, with * and ? as wildcards",
      'p.yaml:9: tenants.acme.effects["a b"] is not a valid tool-name glob: it contains " "; ' +
      "tool names use letters, digits, _ . and -, with * and ? as wildcards",
    ],
  );
});

Deno.test("parsePolicies rejects a tenant name with a wildcard other than * alone", () => {
  assert.deepEqual(problemsOf('tenants:\n  "team-*": {}\n'), [
    'p.yaml:2: tenants.team-* is not a tenant name: tenants are named exactly, and only "*" alone ' +
    "means every other tenant",
  ]);
});

Deno.test("parsePolicies reports an argument pattern that does not compile, with the regex error", () => {
  assert.deepEqual(
    problemsOf(
      'tenants:\n  acme:\n    arguments:\n      t:\n        path: { pattern: "^(/data" }\n',
    ),
    [
      "p.yaml:5: tenants.acme.arguments.t.path.pattern is not a valid regular expression " +
      "(JavaScript, u flag): Invalid regular expression: /^(/data/u: Unterminated group",
    ],
  );
  // Valid without the u flag, but not with it: validators compile with u.
  assert.deepEqual(
    problemsOf('tenants:\n  acme:\n    arguments:\n      t:\n        a: { pattern: "\\\\-" }\n'),
    [
      "p.yaml:5: tenants.acme.arguments.t.a.pattern is not a valid regular expression " +
      "(JavaScript, u flag): Invalid regular expression: /\\-/u: Invalid escape",
    ],
  );
});

Deno.test("parsePolicies reports an argument pattern that cannot be matched in linear time, naming the construct", () => {
  assert.deepEqual(
    problemsOf(
      'tenants:\n  acme:\n    arguments:\n      t:\n        p: { pattern: "^(?=.*\\\\d)\\\\w+$" }\n',
    ),
    [
      "p.yaml:5: tenants.acme.arguments.t.p.pattern cannot be matched in linear time: it uses a " +
      "lookaround, (?=…); rewrite it in RE2's syntax (no lookaround, no backreferences, repeat " +
      "counts up to 1000): the gateway matches patterns with RE2 so that no input can stall it",
    ],
  );
});

Deno.test("parsePolicies rejects argument constraints of the wrong kind", () => {
  assert.deepEqual(
    problemsOf(`tenants:
  acme:
    arguments:
      t:
        a: { enum: [] }
        b: { enum: [x, { y: 1 }], const: [1] }
        c: { maximum: "50", minLength: -1, maxItems: 1.5 }
        d: { format: date_time }
        e: { format: colour }
        f: { items: { pattern: 7 } }
        g: {}
        h: 5
      u: {}
`),
    [
      "p.yaml:5: tenants.acme.arguments.t.a.enum must not be empty: list the allowed values, e.g. " +
      "[open, closed]",
      "p.yaml:6: tenants.acme.arguments.t.b.enum[1] must be a string, number, true, false or null, " +
      "received a mapping",
      "p.yaml:6: tenants.acme.arguments.t.b.const must be a string, number, true, false or null, " +
      "received a list",
      'p.yaml:7: tenants.acme.arguments.t.c.maximum must be a number, received "50"',
      "p.yaml:7: tenants.acme.arguments.t.c.minLength must be a whole number of at least 0, received -1",
      "p.yaml:7: tenants.acme.arguments.t.c.maxItems must be a whole number of at least 0, received 1.5",
      'p.yaml:8: tenants.acme.arguments.t.d.format is not a known format, received "date_time"; ' +
      'did you mean "date-time"?',
      'p.yaml:9: tenants.acme.arguments.t.e.format is not a known format, received "colour"; ' +
      "known formats are date, time, date-time, iso-time, iso-date-time, duration, uri, " +
      "uri-reference, uri-template, url, email, hostname, ipv4, ipv6, regex, uuid, json-pointer, " +
      "json-pointer-uri-fragment, relative-json-pointer, byte, int32, int64, float, double, " +
      "password, binary",
      "p.yaml:10: tenants.acme.arguments.t.f.items.pattern must be a regular expression string, " +
      "received 7",
      "p.yaml:11: tenants.acme.arguments.t.g has no constraints; add one of pattern, enum, const, " +
      "minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, minItems, " +
      "maxItems, format, items, or remove it",
      "p.yaml:12: tenants.acme.arguments.t.h must be a mapping of JSON Schema constraints, e.g. " +
      "{ maximum: 50 }, received 5",
      "p.yaml:13: tenants.acme.arguments.u constrains no arguments; add one or remove the entry",
    ],
  );
});

Deno.test("parsePolicies rejects a lower bound above its upper bound", () => {
  assert.deepEqual(
    problemsOf(
      "tenants:\n  acme:\n    arguments:\n      t:\n        n: { minimum: 10, maximum: 5 }\n" +
        "        s:\n          minLength: 3\n          maxLength: 2\n",
    ),
    [
      "p.yaml:5: tenants.acme.arguments.t.n.minimum (10) is greater than maximum (5), so no value " +
      "could pass; fix one of them",
      "p.yaml:7: tenants.acme.arguments.t.s.minLength (3) is greater than maxLength (2), so no " +
      "value could pass; fix one of them",
    ],
  );
});

Deno.test("parsePolicies compiles nested items, const and every numeric constraint into the schema", () => {
  const acme = tenant(
    parse(`tenants:
  acme:
    arguments:
      "t*":
        tags: { items: { pattern: "^[a-z]+$", maxLength: 9 }, minItems: 1, maxItems: 3 }
        mode: { const: fast }
        n: { exclusiveMinimum: 0, exclusiveMaximum: 1.5 }
        when: { format: date-time, minLength: 1 }
`),
    "acme",
  );
  assert.deepEqual(acme.arguments[0]?.schema, {
    type: "object",
    properties: {
      tags: { items: { pattern: "^[a-z]+$", maxLength: 9 }, minItems: 1, maxItems: 3 },
      mode: { const: "fast" },
      n: { exclusiveMinimum: 0, exclusiveMaximum: 1.5 },
      when: { format: "date-time", minLength: 1 },
    },
  });
});

Deno.test("parsePolicies requires rate limits in positive whole numbers", () => {
  assert.deepEqual(
    problemsOf(`tenants:
  acme:
    rate_limits:
      a: { per_minute: 0 }
      b: { per_minute: 1.5, burst: -1 }
      c: { burst: 3 }
`),
    [
      "p.yaml:4: tenants.acme.rate_limits.a.per_minute must be a whole number of at least 1, received 0",
      "p.yaml:5: tenants.acme.rate_limits.b.per_minute must be a whole number of at least 1, received 1.5",
      "p.yaml:5: tenants.acme.rate_limits.b.burst must be a whole number of at least 1, received -1",
      "p.yaml:6: tenants.acme.rate_limits.c.per_minute is required, e.g. per_minute: 60",
    ],
  );
});

Deno.test("parsePolicies requires connector keys to be server ids", () => {
  assert.deepEqual(problemsOf('connectors:\n  GitHub: { tenants: "*", effects: [read] }\n'), [
    "p.yaml:2: connectors.GitHub is not a server id: use the id from the fleet file (lowercase " +
    "letters, digits, _ and -, starting with a letter or digit)",
  ]);
});

Deno.test("parsePolicies requires connector tenants as a list or * and effects as a non-empty list", () => {
  assert.deepEqual(
    problemsOf(`connectors:
  a: { tenants: acme, effects: [] }
  b: { effects: [read] }
  c: { tenants: [acme, 3], effects: read }
  d: [read]
`),
    [
      'p.yaml:2: connectors.a.tenants must be a list of tenants or "*", received "acme"; write [acme]',
      "p.yaml:2: connectors.a.effects must not be empty: list the effect classes allowed through " +
      "it, or remove the connector from the fleet",
      'p.yaml:3: connectors.b.tenants is required: list the tenants that may reach b, or write "*"',
      "p.yaml:4: connectors.c.tenants[1] must be a tenant name, received 3",
      "p.yaml:4: connectors.c.effects must be a list of effect classes (read, write, destructive), " +
      'e.g. [read, write], received "read"',
      'p.yaml:5: connectors.d must be a mapping like { tenants: "*", effects: [read] }, received a list',
    ],
  );
  const policy = parse('connectors:\n  a: { tenants: [acme, "*"], effects: [read] }\n');
  assert.equal(policy.connectors.get("a")?.tenants, "*");
});

Deno.test("parsePolicies rejects a tenant or connector defined in two files, naming both places", () => {
  assert.deepEqual(
    problemsOf([
      {
        path: "a.yaml",
        text: 'tenants:\n  acme: {}\nconnectors:\n  gh: { tenants: "*", effects: [read] }\n',
      },
      { path: "b.yaml", text: '# again\ntenants:\n  acme:\n    deny: ["x"]\n' },
      { path: "c.yaml", text: 'connectors:\n  gh: { tenants: "*", effects: [read] }\n' },
    ]),
    [
      "b.yaml:3: tenants.acme is already defined at a.yaml:2; define each tenant once, merging " +
      "the two definitions",
      "c.yaml:2: connectors.gh is already defined at a.yaml:4; define each connector once, " +
      "merging the two definitions",
    ],
  );
});

Deno.test("parsePolicies rejects a tenant defined twice in one file as a duplicate key", () => {
  assert.deepEqual(problemsOf("tenants:\n  acme: {}\n  acme: {}\n"), [
    "p.yaml:3:3: invalid YAML: Map keys must be unique",
  ]);
});

Deno.test("parsePolicies reports the problems of every file together, file by file", () => {
  assert.deepEqual(
    problemsOf([
      { path: "a.yaml", text: "tenants:\n  acme:\n    deny: [x\n" },
      { path: "b.yaml", text: "tenants:\n  acme: {}\n  beta: { allow: x }\n" },
    ]),
    [
      "a.yaml:4:1: invalid YAML: Flow sequence in block collection must be sufficiently indented " +
      "and end with a ]",
      'b.yaml:3: tenants.beta.allow must be a list of tool-name globs, e.g. ["github__*"], received "x"',
    ],
  );
});

const TESTS = `cases:
  - name: get-env is denied
    tenant: default
    tool: everything__get-env
    expect: deny
    code: tool_denied
  - name: echo is allowed
    tenant: default
    tool: everything__echo
    server: everything
    annotations: { readOnlyHint: true, title: Echo }
    arguments: { message: hi }
    expect: allow
`;

Deno.test("parsePolicyTests reads cases with their file and line", () => {
  assert.deepEqual(parsePolicyTests(TESTS, "t.test.yaml"), [
    {
      name: "get-env is denied",
      tenant: "default",
      tool: "everything__get-env",
      expect: "deny",
      code: "tool_denied",
      file: "t.test.yaml",
      line: 2,
    },
    {
      name: "echo is allowed",
      tenant: "default",
      tool: "everything__echo",
      server: "everything",
      annotations: { readOnlyHint: true, title: "Echo" },
      arguments: { message: "hi" },
      expect: "allow",
      file: "t.test.yaml",
      line: 7,
    },
  ]);
  assert.deepEqual(parsePolicyTests("", "t.test.yaml"), []);
});

Deno.test("parsePolicyTests rejects cases missing fields, with unknown keys or wrong values", () => {
  assert.deepEqual(
    testProblemsOf(`cases:
  - name: a
    tenant: ""
    tool: x
    expect: allowed
    expected: deny
  - name: b
    tenant: t
    tool: x
    expect: allow
    code: tool_denied
    server: My Server
    arguments: [1]
    annotations: { readOnlyHnt: true, destructiveHint: "yes" }
  - tool: x
  - just a string
`),
    [
      't.test.yaml:3: cases[0].tenant must be a non-empty string, received ""',
      't.test.yaml:5: cases[0].expect must be allow, deny or approval_required, received "allowed"; ' +
      'did you mean "allow"?',
      't.test.yaml:6: cases[0].expected is not a known field; did you mean "expect"?',
      "t.test.yaml:11: cases[1].code only applies when expect is deny or approval_required; remove it",
      "t.test.yaml:12: cases[1].server must be a server id from the fleet file (lowercase letters, " +
      'digits, _ and -), received "My Server"',
      "t.test.yaml:13: cases[1].arguments must be a mapping of argument names to values, received a list",
      't.test.yaml:14: cases[1].annotations.readOnlyHnt is not a known field; did you mean "readOnlyHint"?',
      't.test.yaml:14: cases[1].annotations.destructiveHint must be true or false, received "yes"',
      "t.test.yaml:15: cases[2].name is required",
      "t.test.yaml:15: cases[2].tenant is required",
      "t.test.yaml:15: cases[2].expect is required",
      "t.test.yaml:16: cases[3] must be a mapping with name, tenant, tool (or resource, or prompt) " +
      'and expect, received "just a string"',
    ],
  );
});

Deno.test("parsePolicyTests reads resource and prompt cases in place of a tool", () => {
  const cases = parsePolicyTests(
    `cases:
  - { name: r, tenant: t, resource: "proxy://fs/a.txt", server: fs, expect: allow }
  - { name: p, tenant: t, prompt: fs__summary, expect: deny, code: not_allowed }
`,
    "t.test.yaml",
  );
  assert.deepEqual(cases.map(({ file: _, line: __, ...rest }) => rest), [
    { name: "r", tenant: "t", resource: "proxy://fs/a.txt", server: "fs", expect: "allow" },
    { name: "p", tenant: "t", prompt: "fs__summary", expect: "deny", code: "not_allowed" },
  ]);
});

Deno.test("parsePolicyTests needs exactly one of tool, resource and prompt, and no call fields on a read", () => {
  assert.deepEqual(
    testProblemsOf(`cases:
  - { name: a, tenant: t, expect: allow }
  - { name: b, tenant: t, tool: x, prompt: y, expect: allow }
  - { name: c, tenant: t, resource: "proxy://fs/a", arguments: { a: 1 }, expect: allow }
  - { name: d, tenant: t, prompt: y, expect: approval_required }
`),
    [
      "t.test.yaml:2: cases[0] needs what to decide: tool (a call), resource (a read) or prompt (a get)",
      "t.test.yaml:3: cases[1] decides one thing; give one of tool, prompt",
      "t.test.yaml:4: cases[2].arguments applies to tool cases only; a resource is decided by its " +
      "name, remove it",
      "t.test.yaml:5: cases[3].expect a prompt is allowed or denied, never approval_required " +
      "(reads need no approval)",
    ],
  );
});

Deno.test("parsePolicyTests rejects two cases with the same name", () => {
  assert.deepEqual(
    testProblemsOf(
      "cases:\n  - { name: a, tenant: t, tool: x, expect: allow }\n" +
        "  - { name: a, tenant: t, tool: y, expect: deny }\n",
    ),
    [
      't.test.yaml:3: cases[1].name "a" is already the name of the case on line 2; give each case ' +
      "its own name",
    ],
  );
});

Deno.test("parsePolicyTests requires a cases list", () => {
  assert.deepEqual(testProblemsOf("case: []\n"), [
    't.test.yaml:1: case is not a known field; did you mean "cases"?',
    "t.test.yaml:1: cases is required: list the test cases under it",
  ]);
  assert.deepEqual(testProblemsOf("cases: {}\n"), [
    "t.test.yaml:1: cases must be a list of test cases, received a mapping",
  ]);
  assert.deepEqual(testProblemsOf("[]\n"), [
    "t.test.yaml:1: the file must be a mapping with a cases list, received a list",
  ]);
});

Deno.test("policyTestFiles lists a directory's test files, a file's sibling, or nothing", async () => {
  const fs = fakeFs({
    "pol/a.yaml": "",
    "pol/a.test.yaml": "",
    "pol/b.test.yml": "",
    "pol/c.yaml": "",
    "rules.yml": "",
    "rules.test.yml": "",
  });
  assert.deepEqual(await policyTestFiles("pol", fs), ["pol/a.test.yaml", "pol/b.test.yml"]);
  assert.deepEqual(await policyTestFiles("pol/a.yaml", fs), ["pol/a.test.yaml"]);
  assert.deepEqual(await policyTestFiles("pol/c.yaml", fs), []);
  assert.deepEqual(await policyTestFiles("pol/b.test.yml", fs), ["pol/b.test.yml"]);
  assert.deepEqual(await policyTestFiles("rules.yml", fs), ["rules.test.yml"]);
  assert.deepEqual(await policyTestFiles("nowhere", fs), []);
});

Deno.test("the shipped policies/default.yaml compiles", async () => {
  const policy = await loadPolicies(POLICIES);
  assert.deepEqual(policy.files, [`${POLICIES}/default.yaml`]);
  const star = tenant(policy, "*");
  assert.equal(star.deny.some((rule) => rule.match("everything__get-env")), true);
  assert.equal(star.allow.length, 0);
  assert.equal(
    star.effects.find((rule) => rule.match("memory__delete_entities"))?.effect,
    "destructive",
  );
  assert.deepEqual(star.approval, new Set(["destructive"]));
  assert.equal(
    star.rateLimits.find((rule) => rule.match("everything__trigger-long-running-operation"))
      ?.perMinute,
    30,
  );
  assert.deepEqual(
    policy.connectors.get("memory")?.effects,
    new Set(["read", "write", "destructive"]),
  );
  assert.deepEqual(policy.connectors.get("everything")?.effects, new Set(["read", "write"]));
});

Deno.test("the shipped policies/default.test.yaml parses", async () => {
  const files = await policyTestFiles(POLICIES);
  assert.deepEqual(files, [`${POLICIES}/default.test.yaml`]);
  const cases = parsePolicyTests(await Deno.readTextFile(files[0]!), files[0]!);
  assert.ok(cases.length >= 3);
  assert.deepEqual(
    cases.find((c) => c.tool === "everything__get-env" && c.tenant === "default"),
    {
      name: "get-env is denied (it leaks the server environment)",
      tenant: "default",
      tool: "everything__get-env",
      expect: "deny",
      code: "tool_denied",
      file: files[0],
      line: 3,
    },
  );
});

Deno.test("parsePolicies reads a tenant's discovery mode and always_active globs", () => {
  const error = rejection(() => parse("tenants:\n  acme: {}\n  bad:\n    discovery: lazy\n"));
  assert.match(error.message, /p\.yaml:4: tenants\.bad\.discovery must be one of legacy, search/);
  const good = parse(
    "tenants:\n  acme:\n    discovery: search\n    always_active: [system_status]\n",
  );
  const acme = tenant(good, "acme");
  assert.equal(acme.discovery, "search");
  assert.equal(acme.alwaysActive[0]?.match("system_status"), true);
});

Deno.test("parsePolicies reads approval as effect classes, an approver, or { effects, by }", () => {
  const policies = parsePolicies([{
    path: "p.yaml",
    text: `tenants:
  a: { approval: [write, destructive] }
  b: { approval: in_band }
  c: { approval: { effects: [destructive], by: in_band } }
  d: {}
`,
  }]);
  const of = (t: string) => policies.tenants.get(t)!;
  assert.deepEqual([...of("a").approval], ["write", "destructive"]);
  assert.equal(of("a").approvalBy, "operator");
  assert.deepEqual([...of("b").approval], ["destructive"]);
  assert.equal(of("b").approvalBy, "in_band");
  assert.equal(of("c").approvalBy, "in_band");
  assert.equal(of("d").approvalBy, "operator", "an operator approves by default");
  assert.deepEqual(
    problemsOf("tenants:\n  a:\n    approval: { by: client, effect: [write] }\n"),
    [
      'p.yaml:3: tenants.a.approval.effect is not a known field; did you mean "effects"?',
      "p.yaml:3: tenants.a.approval.by must name who approves: operator (the approvals API, the " +
      'default) or in_band (the calling client\'s user, through elicitation), received "client"',
    ],
  );
});

Deno.test("parsePolicies reads resources: and prompts: as an allowlist or { allow, deny }", () => {
  const policies = parsePolicies([{
    path: "p.yaml",
    text: `tenants:
  a:
    resources: ["proxy://memory/*"]
    prompts: { deny: ["memory__*"] }
`,
  }]);
  const a = policies.tenants.get("a")!;
  assert.ok(a.resources.allow[0]!.match("proxy://memory/graph"));
  assert.equal(a.resources.allow[0]!.source.line, 3);
  assert.ok(a.prompts.deny[0]!.match("memory__summary"));
  assert.deepEqual(a.prompts.allow, []);
  assert.deepEqual(
    problemsOf(`tenants:
  a:
    resources: { allow: "proxy://x/*", block: [] }
    prompts: ["has space"]
  b:
    resources: ["proxy://x/ y"]
`),
    [
      "p.yaml:3: tenants.a.resources.block is not a known field; known fields are allow, deny, " +
      "rate_limits",
      'p.yaml:3: tenants.a.resources.allow must be a list of resource globs, e.g. ["proxy://memory/*"], received "proxy://x/*"',
      'p.yaml:4: tenants.a.prompts[0] "has space" is not a valid tool-name glob: it contains " "; tool names use letters, digits, _ . and -, with * and ? as wildcards',
      'p.yaml:6: tenants.b.resources[0] "proxy://x/ y" is not a valid resource URI glob: use at most 1024 visible characters (no spaces), with * and ? as wildcards',
    ],
  );
});

Deno.test("parsePolicies reads rate_limits: of resources: (URI globs) and prompts: (name globs)", () => {
  const policies = parsePolicies([{
    path: "p.yaml",
    text: `tenants:
  a:
    resources:
      allow: ["proxy://fs/*"]
      rate_limits: { "proxy://fs/*": { per_minute: 120, burst: 20 } }
    prompts: { rate_limits: { "memory__*": { per_minute: 30 } } }
`,
  }]);
  const a = policies.tenants.get("a")!;
  assert.deepEqual(a.resources.rateLimits.map(plain), [{
    glob: "proxy://fs/*",
    perMinute: 120,
    burst: 20,
    source: { file: "p.yaml", line: 5, text: "resources rate_limit proxy://fs/* 120/min burst 20" },
  }]);
  assert.deepEqual(a.prompts.rateLimits.map(plain), [{
    glob: "memory__*",
    perMinute: 30,
    burst: 30,
    source: { file: "p.yaml", line: 6, text: "prompts rate_limit memory__* 30/min burst 30" },
  }]);
  assert.deepEqual(a.rateLimits, [], "item limits are not tool limits");
  assert.deepEqual(
    problemsOf(`tenants:
  a:
    resources: { rate_limits: { "proxy://x/ y": { per_minute: 5 }, "proxy://y/*": 5 } }
    prompts: { rate_limits: { "a b": { per_minute: 0 } } }
`),
    [
      'p.yaml:3: tenants.a.resources.rate_limits["proxy://x/ y"] "proxy://x/ y" is not a valid ' +
      "resource URI glob: use at most 1024 visible characters (no spaces), with * and ? as wildcards",
      'p.yaml:3: tenants.a.resources.rate_limits["proxy://y/*"] must be a mapping like ' +
      "{ per_minute: 60, burst: 10 }, received 5",
      'p.yaml:4: tenants.a.prompts.rate_limits["a b"] is not a valid tool-name glob: it contains ' +
      '" "; tool names use letters, digits, _ . and -, with * and ? as wildcards',
      'p.yaml:4: tenants.a.prompts.rate_limits["a b"].per_minute must be a whole number of at ' +
      "least 1, received 0",
    ],
  );
});

Deno.test("parsePolicies reads trusted_annotations from every file: server ids, or * for all", () => {
  assert.equal(parse("tenants:\n  acme: {}\n").trustedAnnotations, undefined);
  const listed = parsePolicies([
    { path: "a.yaml", text: "trusted_annotations: [fs]\n" },
    { path: "b.yaml", text: "trusted_annotations: [github, fs]\n" },
  ]);
  assert.deepEqual([...listed.trustedAnnotations as Set<string>].sort(), ["fs", "github"]);
  assert.equal(parse('trusted_annotations: "*"\n').trustedAnnotations, "*");
  assert.deepEqual(problemsOf("trusted_annotations: fs\n"), [
    'p.yaml:1: trusted_annotations must be a list of server ids whose readOnlyHint counts, like [fs], or "*", received "fs"',
  ]);
  assert.deepEqual(problemsOf("trusted_annotations: [fs, GitHub]\n"), [
    'p.yaml:1: trusted_annotations[1] must be a server id from the fleet file (lowercase letters, digits, _ and -), received "GitHub"',
  ]);
});
