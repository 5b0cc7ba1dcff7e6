import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { type PolicyCliIo, runPolicyCommand } from "./policy_cli.ts";

const POLICIES = fileURLToPath(new URL("../policies", import.meta.url));

/** Runs `policy <args>` in process and collects what it printed. */
async function run(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: PolicyCliIo = { out: (l) => void out.push(l), err: (l) => void err.push(l), env };
  const code = await runPolicyCommand(args, io);
  return { code, out: out.join("\n"), err: err.join("\n") };
}

/** A temporary policy directory holding `files`, removed after `fn`. */
async function withPolicyDir(
  files: Record<string, string>,
  fn: (dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "policy_cli_test_" });
  try {
    for (const [name, text] of Object.entries(files)) {
      await Deno.writeTextFile(`${dir}/${name}`, text);
    }
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The 1-based line of the first line of `file` containing `text`. */
async function lineOf(file: string, text: string): Promise<number> {
  const index = (await Deno.readTextFile(file)).split("\n").findIndex((l) => l.includes(text));
  assert.ok(index >= 0, `${text} in ${file}`);
  return index + 1;
}

Deno.test("policy check accepts the shipped policies", async () => {
  const { code, out, err } = await run(["check"], { MCP_POLICY_PATH: POLICIES });
  assert.equal(code, 0, err);
  assert.match(out, /^ok: 1 tenant\(s\), 2 connector\(s\) from .*default\.yaml$/m);
  assert.match(out, /^ok: \d+ test case\(s\) in .*default\.test\.yaml$/m);
});

Deno.test("policy check rejects a broken policy with exit 1 and file:line", async () => {
  const policy = 'tenants:\n  acme:\n    allow: ["github__*"]\n    dney: ["github__delete_*"]\n';
  await withPolicyDir({ "broken.yaml": policy }, async (dir) => {
    const { code, out, err } = await run(["check", "--path", dir]);
    assert.equal(code, 1);
    assert.equal(out, "");
    assert.ok(
      err.includes(`${dir}/broken.yaml:4: tenants.acme.dney is not a known field`),
      err,
    );
  });
});

Deno.test("policy explain shows the deny, its code and the deciding rule for everything__get-env", async () => {
  const { code, out } = await run([
    "explain",
    "--path",
    POLICIES,
    "--tenant",
    "default",
    "--tool",
    "everything__get-env",
  ]);
  assert.equal(code, 0);
  const file = `${POLICIES}/default.yaml`;
  const line = await lineOf(file, "- everything__get-env");
  assert.match(out, /^verdict: +deny \(tool_denied\)$/m);
  assert.match(out, /^effect: +write, by default effect class write/m);
  assert.ok(out.includes(`decided by:  ${file}:${line} deny "everything__get-env"`), out);
});

Deno.test("policy explain shows approval_required for memory__delete_entities", async () => {
  const { code, out } = await run([
    "explain",
    "--path",
    POLICIES,
    "--tenant",
    "default",
    "--tool",
    "memory__delete_entities",
    "--args",
    '{"entityNames":["x"]}',
  ]);
  assert.equal(code, 0);
  const file = `${POLICIES}/default.yaml`;
  assert.match(out, /^verdict: +approval_required$/m);
  assert.ok(
    out.includes(
      `effect:      destructive, by ${file}:${await lineOf(file, '"memory__delete_*"')}`,
    ),
    out,
  );
  assert.ok(out.includes(`decided by:  ${file}:${await lineOf(file, "approval:")} approval`), out);
  assert.match(
    out,
    /^would ask: +an approval of this destructive call .*arguments hash [0-9a-f]{64}/m,
  );
});

Deno.test("policy explain --json prints a parseable verdict", async () => {
  const { code, out } = await run([
    "explain",
    "--json",
    "--path",
    POLICIES,
    "--tenant",
    "acme",
    "--tool",
    "memory__read_graph",
    "--annotations",
    '{"readOnlyHint":true}',
  ]);
  assert.equal(code, 0);
  const parsed = JSON.parse(out);
  assert.equal(parsed.tenant, "acme");
  assert.equal(parsed.server, "memory");
  assert.equal(parsed.verdict.action, "allow");
  assert.equal(parsed.verdict.effect, "read");
  assert.equal(parsed.effect.class, "read");
  assert.match(parsed.effect.rule, /default\.yaml:\d+ effect memory__read_graph = read$/);
});

Deno.test("policy explain exits 2 naming --args on bad JSON", async () => {
  const { code, out, err } = await run([
    "explain",
    "--path",
    POLICIES,
    "--tenant",
    "default",
    "--tool",
    "everything__echo",
    "--args",
    "{message: hi}",
  ]);
  assert.equal(code, 2);
  assert.equal(out, "");
  assert.match(err, /^--args is not valid JSON/);
  assert.match(err, /Usage: main\.ts policy/);
});

Deno.test("policy test passes every case in the shipped default.test.yaml", async () => {
  const { code, out, err } = await run(["test", "--path", POLICIES]);
  assert.equal(code, 0, out + err);
  const lines = out.split("\n");
  const cases = lines.slice(0, -1);
  assert.ok(cases.length > 0);
  for (const line of cases) assert.match(line, /^ok {3}.*default\.test\.yaml:\d+ /);
  assert.equal(lines.at(-1), `${cases.length} passed, 0 failed`);
});

Deno.test("policy test fails with exit 1, expected vs got and the summary line", async () => {
  const policy = "tenants:\n  acme:\n    deny: [secret__*]\n";
  const cases = [
    "cases:",
    "  - name: secrets are denied",
    "    tenant: acme",
    "    tool: secret__read",
    "    expect: deny",
    "    code: tool_denied",
    "  - name: echo is denied (wrongly expected)",
    "    tenant: acme",
    "    tool: echo",
    "    expect: deny",
    "    code: tool_denied",
    "",
  ].join("\n");
  await withPolicyDir({ "p.yaml": policy, "p.test.yaml": cases }, async (dir) => {
    const { code, out } = await run(["test", "--path", dir]);
    assert.equal(code, 1);
    assert.deepEqual(out.split("\n"), [
      `ok   ${dir}/p.test.yaml:2 secrets are denied`,
      `FAIL ${dir}/p.test.yaml:7 echo is denied (wrongly expected): expected deny (tool_denied), ` +
      `got allow (no allowlist for tenant "acme": allowed by default)`,
      "1 passed, 1 failed",
    ]);
  });
});

Deno.test("policy test without cases exits 1 and says so", async () => {
  await withPolicyDir({ "p.yaml": "tenants:\n  acme: {}\n" }, async (dir) => {
    const { code, out, err } = await run(["test", "--path", dir]);
    assert.equal(code, 1);
    assert.equal(out, "0 passed, 0 failed");
    assert.match(err, /^No policy test cases found/);
  });
});

Deno.test("an unknown policy subcommand exits 2 with usage", async () => {
  const { code, out, err } = await run(["frobnicate"]);
  assert.equal(code, 2);
  assert.equal(out, "");
  assert.match(err, /^Unknown policy command "frobnicate"/);
  assert.match(err, /Usage: main\.ts policy check\|explain\|test/);
});

/** A tools/list snapshot: fs__write_file as an upstream annotates it, and one escalated tool. */
const SNAPSHOT = JSON.stringify({
  tools: [
    {
      name: "fs__write_file",
      inputSchema: { type: "object", properties: { path: { type: "string" } } },
      annotations: { destructiveHint: true },
    },
    {
      name: "fs__read_file",
      inputSchema: { type: "object" },
      annotations: { readOnlyHint: true, destructiveHint: true },
      _meta: { "agent33/escalation": "scanner finding hidden-instructions (high)" },
    },
  ],
});

Deno.test("policy explain --descriptors decides with the listed annotations, as the live call does", async () => {
  await withPolicyDir({
    "p.yaml": 'tenants:\n  "*": { approval: [destructive] }\n',
    "tools.json": SNAPSHOT,
  }, async (dir) => {
    const bare = await run([
      "explain",
      "--path",
      `${dir}/p.yaml`,
      "--tenant",
      "t",
      "--tool",
      "fs__write_file",
    ]);
    assert.match(bare.out, /^verdict: +allow/m, "without descriptors the annotations are unknown");
    const live = await run([
      "explain",
      "--path",
      `${dir}/p.yaml`,
      "--tenant",
      "t",
      "--tool",
      "fs__write_file",
      "--descriptors",
      `${dir}/tools.json`,
    ]);
    assert.equal(live.code, 0, live.err);
    assert.match(live.out, /^verdict: +approval_required/m);
    assert.match(live.out, /^effect: +destructive, by annotation destructiveHint/m);
  });
});

Deno.test("policy explain and test name the scanner escalation of a listed tool", async () => {
  await withPolicyDir({
    "p.yaml": 'tenants:\n  "*": { approval: [destructive] }\n',
    "p.test.yaml":
      "cases:\n  - name: the escalated read needs approval\n    tenant: t\n    tool: fs__read_file\n    expect: approval_required\n",
    "tools.json": SNAPSHOT,
  }, async (dir) => {
    const explained = await run([
      "explain",
      "--path",
      `${dir}/p.yaml`,
      "--tenant",
      "t",
      "--tool",
      "fs__read_file",
      "--descriptors",
      `${dir}/tools.json`,
    ]);
    assert.match(explained.out, /^verdict: +approval_required/m);
    assert.match(explained.out, /scanner escalation: scanner finding hidden-instructions \(high\)/);
    const tested = await run([
      "test",
      "--path",
      `${dir}/p.yaml`,
      "--descriptors",
      `${dir}/tools.json`,
    ]);
    assert.equal(tested.code, 0, tested.out);
    const missing = await run([
      "explain",
      "--path",
      `${dir}/p.yaml`,
      "--tenant",
      "t",
      "--tool",
      "fs__other",
      "--descriptors",
      `${dir}/tools.json`,
    ]);
    assert.equal(missing.code, 1);
    assert.match(missing.err, /"fs__other" is not in the descriptors/);
  });
});

Deno.test("policy explain judges an upstream's readOnlyHint as the live call does: untrusted unless trusted_annotations lists it", async () => {
  const explain = (dir: string, file: string) =>
    run([
      "explain",
      "--path",
      `${dir}/${file}`,
      "--tenant",
      "t",
      "--tool",
      "notes__tidy",
      "--annotations",
      '{"readOnlyHint": true}',
    ]);
  await withPolicyDir({
    "p.yaml": 'tenants:\n  "*": { approval: [write, destructive] }\n',
    "trusting.yaml":
      'trusted_annotations: [notes]\ntenants:\n  "*": { approval: [write, destructive] }\n',
  }, async (dir) => {
    const untrusted = await explain(dir, "p.yaml");
    assert.equal(untrusted.code, 0, untrusted.err);
    assert.match(untrusted.out, /^verdict: +approval_required/m);
    assert.match(
      untrusted.out,
      /^effect: +write, by default effect class write \(the readOnlyHint of notes is not trusted/m,
    );
    const trusted = await explain(dir, "trusting.yaml");
    assert.match(trusted.out, /^verdict: +allow/m);
    assert.match(trusted.out, /^effect: +read, by annotation readOnlyHint/m);
  });
});

/** `policy explain --path dir --tenant acme <flags>`. */
function explainAcme(dir: string, ...flags: string[]) {
  return run(["explain", "--path", dir, "--tenant", "acme", ...flags]);
}

const ITEM_POLICY = `tenants:
  acme:
    resources:
      allow: ["proxy://fs/*"]
      deny: ["proxy://fs/secret/*"]
      rate_limits: { "proxy://fs/*": { per_minute: 60 } }
    prompts:
      allow: ["fs__*"]
connectors:
  fs: { tenants: [acme], effects: [read] }
  git: { tenants: [other], effects: [read] }
`;

Deno.test("policy explain --resource names the resources: rule that decided a read and the rate limit it takes", async () => {
  await withPolicyDir({ "policy.yaml": ITEM_POLICY }, async (dir) => {
    const file = `${dir}/policy.yaml`;
    const allowed = await explainAcme(dir, "--resource", "proxy://fs/a.txt");
    assert.equal(allowed.code, 0, allowed.err);
    assert.match(allowed.out, /^verdict: +allow$/m);
    assert.match(
      allowed.out,
      /^resource: +proxy:\/\/fs\/a\.txt for tenant "acme", upstream fs \(from the URI/m,
    );
    assert.ok(
      allowed.out.includes(`decided by:  ${file}:4 resources allow "proxy://fs/*"`),
      allowed.out,
    );
    assert.ok(
      allowed.out.includes(
        `rate limit:  ${file}:6 resources rate_limit proxy://fs/* 60/min burst 60 (one bucket`,
      ),
      allowed.out,
    );
    const denied = await explainAcme(dir, "--resource", "proxy://fs/secret/k");
    assert.match(denied.out, /^verdict: +deny \(tool_denied\)$/m);
    assert.ok(
      denied.out.includes(`decided by:  ${file}:5 resources deny "proxy://fs/secret/*"`),
      denied.out,
    );
    assert.doesNotMatch(denied.out, /rate limit:/);
  });
});

Deno.test("policy explain --prompt takes the upstream from the prompt name, so its connector boundary applies", async () => {
  await withPolicyDir({ "policy.yaml": ITEM_POLICY }, async (dir) => {
    const { code, out } = await explainAcme(dir, "--prompt", "git__log", "--json");
    assert.equal(code, 0);
    const explained = JSON.parse(out);
    assert.equal(explained.prompt, "git__log");
    assert.equal(explained.server, "git");
    assert.equal(explained.verdict.code, "connector_denied");
    assert.match(explained.verdict.reason, /add it to connectors\.git\.tenants/);
  });
});

Deno.test("policy explain --resource refuses a URI its server would read as another resource, as the gateway does", async () => {
  await withPolicyDir({ "policy.yaml": ITEM_POLICY }, async (dir) => {
    const uri = "proxy://fs/file:///public/../secret/k";
    const { code, out } = await explainAcme(dir, "--resource", uri);
    assert.equal(code, 0);
    assert.match(out, /^verdict: +deny \(invalid_arguments\)$/m);
    assert.match(out, /resolves to "file:\/\/\/secret\/k", which is what its server would read/);
  });
});

Deno.test("policy explain decides one of --tool, --resource and --prompt, and a read takes no call flags", async () => {
  const none = await run(["explain", "--path", POLICIES, "--tenant", "acme"]);
  assert.equal(none.code, 2);
  assert.match(none.err, /needs one of --tool X, --resource URI or --prompt NAME/);
  const two = await explainAcme(POLICIES, "--tool", "a", "--prompt", "b");
  assert.equal(two.code, 2);
  const args = await explainAcme(POLICIES, "--prompt", "b", "--args", "{}");
  assert.equal(args.code, 2);
  assert.match(
    args.err,
    /^--args applies to --tool only; a resource or prompt is decided by name/m,
  );
});

Deno.test("policy test decides resource and prompt cases, reporting the one that fails", async () => {
  const cases = `cases:
  - { name: reading a file, tenant: acme, resource: "proxy://fs/a.txt", expect: allow }
  - { name: reading a secret, tenant: acme, resource: "proxy://fs/secret/k", expect: deny, code: tool_denied }
  - { name: a git prompt, tenant: acme, prompt: git__log, expect: allow }
`;
  await withPolicyDir({ "policy.yaml": ITEM_POLICY, "policy.test.yaml": cases }, async (dir) => {
    const { code, out } = await run(["test", "--path", dir]);
    assert.equal(code, 1);
    assert.match(out, /^ok {3}.*policy\.test\.yaml:2 reading a file$/m);
    assert.match(out, /^ok {3}.*policy\.test\.yaml:3 reading a secret$/m);
    assert.match(
      out,
      /^FAIL .*policy\.test\.yaml:4 a git prompt: expected allow, got deny \(connector_denied: .*connector git\)$/m,
    );
    assert.match(out, /^2 passed, 1 failed$/m);
  });
});
