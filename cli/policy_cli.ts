/**
 * `main.ts policy check | explain | test`: the governance policy, offline.
 *
 * `check` validates the policy files and their test files, `explain` shows what the gate would
 * decide for one call (or one resource read, one prompt get) and which rules decided it, `test` runs the `*.test.yaml` cases against the
 * policy (like `opa test`). Nothing here has side effects: every decision is a dry run of the same
 * {@link ToolGovernance} the gateway uses, so no approval is filed, no rate limit is used and
 * nothing is audited. Each command returns its exit code: 0 ok, 1 failure, 2 usage.
 * @module
 */
import { type CommandIo, EXIT_USAGE, parseFlags, usageError } from "./command.ts";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../core/support/errors.ts";
import type { PolicySet } from "../core/governance/policy.ts";
import {
  loadPolicies,
  parsePolicyTests,
  type PolicyTestCase,
  policyTestFiles,
} from "../core/governance/policy_loader.ts";
import {
  APPROVAL_TOKEN_META_KEY,
  effectClassOf,
  subjectOf,
  type Verdict,
} from "../core/governance/tool_governance.ts";
import {
  type Call,
  decide,
  decideItem,
  DEFAULT_SEPARATOR,
  type DescriptorSource,
  itemServerOf,
  type ItemUse,
  offlineGovernance,
  readDescriptors,
  SERVER_ID,
  serverOf,
  targetOf,
  tenantPolicy,
} from "./policy_dry_run.ts";

/** Where a policy command prints (one line per `out` call), and the environment it reads (MCP_POLICY_PATH). */
export type PolicyCliIo = CommandIo;

/** The usage of `main.ts policy`. */
export const POLICY_HELP = `Usage: main.ts policy check|explain|test [options]
       deno task policy check|explain|test [options]

Commands:
  check      Validate the policy files and their *.test.yaml case files
  explain    Show what the gateway would decide for one call, read or get, and which rules
             decided it
  test       Run the cases in the *.test.yaml files against the policy (like "opa test")

Options (every command):
  --path P             Policy file or directory (MCP_POLICY_PATH, default policies)

Options (explain):
  --tenant T           The caller's tenant (required)
  --tool X             The tool name as the gateway names it, e.g. memory__delete_entities
  --resource URI       Or a resource read: the URI as the gateway lists it, e.g.
                       proxy://everything/demo://resource/static/document/architecture.md
  --prompt NAME        Or a prompt get: the name as the gateway lists it, e.g. everything__simple-prompt
  --args JSON          The call's arguments, a JSON object (default {})
  --server ID          The upstream server id, for its connector boundary (default: the tool or
                       prompt name's prefix before "__", the server of a proxy://<server>/ URI)
  --annotations JSON   The tool's MCP annotations, e.g. '{"readOnlyHint":true}'
  --json               Print the verdict as JSON

Options (explain, test): the tools as the gateway serves them, instead of --annotations
  --descriptors FILE   A tools/list result saved as JSON ({"tools": [...]}, or the list alone):
                       the tool's annotations, inputSchema and scanner escalation apply
  --gateway URL        Read tools/list from a running gateway (e.g. http://127.0.0.1:3000/mcp)
  --token T            The bearer token for --gateway (default MCP_GATEWAY_TOKEN)

Decisions are dry runs: no approval request is filed, no rate limit is used, nothing is audited.
A resource or prompt is decided by its name alone; the scanner's quarantine applies at run time.
A tool found in the descriptors is decided as the gateway decides it: a tool the scanner
escalated (listed with _meta["agent33/escalation"]) is destructive, and the reason says so.
Exit codes: 0 ok, 1 invalid policy or failed cases, 2 usage.`;

/** Runs `policy <subcommand> [options]` (`args` without `policy`) and returns the exit code. */
export async function runPolicyCommand(args: string[], io: PolicyCliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === "-h" || sub === "--help" || sub === "help") {
    io.out(POLICY_HELP);
    return 0;
  }
  if (sub === undefined) return usage(io, "policy needs a command: check, explain or test");
  if (rest.includes("-h") || rest.includes("--help")) {
    io.out(POLICY_HELP);
    return 0;
  }
  switch (sub) {
    case "check":
      return await check(rest, io);
    case "explain":
      return await explain(rest, io);
    case "test":
      return await test(rest, io);
    default:
      return usage(io, `Unknown policy command "${sub}"; use check, explain or test`);
  }
}

function usage(io: PolicyCliIo, message: string): number {
  return usageError(io, POLICY_HELP, message);
}

function policyPath(path: string | undefined, io: PolicyCliIo): string {
  return path ?? io.env.MCP_POLICY_PATH ?? "policies";
}

/** The policies at `path`, or undefined after printing why they cannot be loaded. */
async function load(path: string, io: PolicyCliIo): Promise<PolicySet | undefined> {
  try {
    return await loadPolicies(path);
  } catch (error) {
    if (!(error instanceof GatewayError)) throw error;
    io.err(error.message);
    return undefined;
  }
}

/** Every case in the test files for `path`, or undefined after printing every problem. */
async function loadCases(
  path: string,
  io: PolicyCliIo,
): Promise<{ files: string[]; cases: PolicyTestCase[] } | undefined> {
  let files: string[];
  try {
    files = await policyTestFiles(path);
  } catch (error) {
    if (!(error instanceof GatewayError)) throw error;
    io.err(error.message);
    return undefined;
  }
  const cases: PolicyTestCase[] = [];
  let ok = true;
  for (const file of files) {
    try {
      cases.push(...parsePolicyTests(await Deno.readTextFile(file), file));
    } catch (error) {
      ok = false;
      if (error instanceof GatewayError) io.err(error.message);
      else io.err(`Cannot read policy test file "${file}": ${(error as Error).message}`);
    }
  }
  return ok ? { files, cases } : undefined;
}

async function check(args: string[], io: PolicyCliIo): Promise<number> {
  const parsed = parseFlags(io, POLICY_HELP, { args, options: { path: { type: "string" } } });
  if (!parsed) return EXIT_USAGE;
  const path = policyPath(parsed.values.path, io);
  const policies = await load(path, io);
  const tests = await loadCases(path, io);
  if (!policies || !tests) return 1;
  if (policies.files.length === 0) {
    io.out(
      `ok: no policy files at "${path}": the built-in default applies ` +
        "(every tool is allowed, destructive calls need an approval)",
    );
  } else {
    io.out(
      `ok: ${policies.tenants.size} tenant(s), ${policies.connectors.size} connector(s) from ${
        policies.files.join(", ")
      }`,
    );
  }
  if (tests.files.length > 0) {
    io.out(`ok: ${tests.cases.length} test case(s) in ${tests.files.join(", ")}`);
  }
  return 0;
}

/** A flag's JSON object value, or a usage message naming the flag. */
function jsonObject(flag: string, text: string | undefined): Record<string, unknown> | string {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `${flag} is not valid JSON (${(error as Error).message}): ${text}`;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return `${flag} must be a JSON object, e.g. '{"key":"value"}', received ${text}`;
  }
  return value as Record<string, unknown>;
}

async function explain(args: string[], io: PolicyCliIo): Promise<number> {
  const parsed = parseFlags(io, POLICY_HELP, {
    args,
    options: {
      path: { type: "string" },
      tenant: { type: "string" },
      tool: { type: "string" },
      resource: { type: "string" },
      prompt: { type: "string" },
      args: { type: "string" },
      server: { type: "string" },
      annotations: { type: "string" },
      json: { type: "boolean" },
      descriptors: { type: "string" },
      gateway: { type: "string" },
      token: { type: "string" },
    },
  });
  if (!parsed) return EXIT_USAGE;
  const { values } = parsed;
  if (!values.tenant) return usage(io, "policy explain needs --tenant T (the caller's tenant)");
  const given = [values.tool, values.resource, values.prompt].filter((name) => name);
  if (given.length !== 1) {
    return usage(
      io,
      "policy explain needs one of --tool X, --resource URI or --prompt NAME (what to decide)",
    );
  }
  if (values.server !== undefined && !SERVER_ID.test(values.server)) {
    return usage(
      io,
      `--server must be a server id from the fleet file (lowercase letters, digits, _ and -), received "${values.server}"`,
    );
  }
  if (!values.tool) {
    const toolOnly = ["args", "annotations", "descriptors", "gateway", "token"] as const;
    const extra = toolOnly.find((flag) => values[flag] !== undefined);
    if (extra) {
      return usage(
        io,
        `--${extra} applies to --tool only; a resource or prompt is decided by name`,
      );
    }
    const use: ItemUse = {
      tenant: values.tenant,
      kind: values.resource ? "resource" : "prompt",
      name: (values.resource || values.prompt)!,
      ...(values.server === undefined ? {} : { server: values.server }),
    };
    return await explainItem(use, values, io);
  }
  return await explainTool({ ...values, tenant: values.tenant, tool: values.tool }, io);
}

/** The flags of `explain --tool`. */
interface ToolFlags extends DescriptorSource {
  path?: string | undefined;
  tenant: string;
  tool: string;
  args?: string | undefined;
  server?: string | undefined;
  annotations?: string | undefined;
  json?: boolean | undefined;
}

/** `explain` of a tool call. */
async function explainTool(values: ToolFlags, io: PolicyCliIo): Promise<number> {
  const callArgs = jsonObject("--args", values.args);
  if (typeof callArgs === "string") return usage(io, callArgs);
  const annotations = jsonObject("--annotations", values.annotations);
  if (typeof annotations === "string") return usage(io, annotations);
  for (const hint of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]) {
    if (hint in annotations && typeof annotations[hint] !== "boolean") {
      return usage(io, `--annotations ${hint} must be true or false`);
    }
  }

  const path = policyPath(values.path, io);
  const policies = await load(path, io);
  if (!policies) return 1;
  const call: Call = {
    tenant: values.tenant,
    tool: values.tool,
    args: callArgs,
    ...(values.annotations === undefined ? {} : { annotations }),
    ...(values.server === undefined ? {} : { server: values.server }),
  };
  const server = serverOf(call, io.env.MCP_PROXY_TOOL_SEPARATOR ?? DEFAULT_SEPARATOR);
  const descriptors = await readDescriptors(values, io);
  if (typeof descriptors === "string") {
    io.err(descriptors);
    return 1;
  }
  const listed = descriptors.get(call.tool);
  if (descriptors.size > 0 && !listed) {
    io.err(
      `Tool "${call.tool}" is not in the descriptors (${descriptors.size} tools); it is hidden ` +
        "from this caller, not served, or named differently (use the name tools/list shows)",
    );
    return 1;
  }
  const target = targetOf(call, server.id, listed);
  const verdict = await decide(offlineGovernance(policies), call, target);
  const policy = tenantPolicy(policies, call.tenant);
  const effect = effectClassOf(subjectOf({ ...target, name: call.tool }), policies, policy);

  if (values.json) {
    io.out(JSON.stringify(
      {
        tenant: call.tenant,
        tool: call.tool,
        ...(server.id === undefined ? {} : { server: server.id }),
        verdict,
        effect: { class: effect.effect, rule: effect.rule },
      },
      null,
      2,
    ));
    return 0;
  }

  const where = server.id === undefined
    ? "no upstream server (no connector boundary)"
    : `upstream ${server.id}${server.inferred ? " (from the tool name; --server overrides)" : ""}`;
  io.out(`verdict:     ${verdict.action}${verdict.action === "deny" ? ` (${verdict.code})` : ""}`);
  io.out(`call:        ${call.tool} for tenant "${call.tenant}", ${where}`);
  io.out(`policy:      ${policies.files.join(", ") || "the built-in default"}`);
  io.out(`effect:      ${effect.effect}, by ${effect.rule}`);
  if (listed) io.out(`descriptor:  from ${values.descriptors ?? values.gateway}`);
  io.out(`decided by:  ${verdict.rule ?? "no single rule (see the reason)"}`);
  if (verdict.action !== "allow") io.out(`reason:      ${verdict.reason}`);
  if (verdict.action === "approval_required") {
    const { request } = verdict;
    io.out(
      `would ask:   an approval of this ${request.effect} call (tenant "${request.tenant}", tool ` +
        `${request.tool}, arguments hash ${request.argumentsHash}); an operator approves the ` +
        `request with POST /v1/approvals/<id>/approve, then the caller retries the same call ` +
        `with the token in _meta["${APPROVAL_TOKEN_META_KEY}"]`,
    );
  }
  if (verdict.action !== "deny") {
    for (const rule of policy?.rateLimits.filter((r) => r.match(call.tool)) ?? []) {
      io.out(
        `rate limit:  ${rule.source.file}:${rule.source.line} ${rule.source.text} (not used by a dry run)`,
      );
    }
  }
  return 0;
}

/** `explain` of a resource read or prompt get. */
async function explainItem(
  use: ItemUse,
  flags: { path?: string | undefined; json?: boolean | undefined },
  io: PolicyCliIo,
): Promise<number> {
  const policies = await load(policyPath(flags.path, io), io);
  if (!policies) return 1;
  const server = itemServerOf(use, io.env.MCP_PROXY_TOOL_SEPARATOR ?? DEFAULT_SEPARATOR);
  const verdict = decideItem(offlineGovernance(policies), use, server.id);
  if (flags.json) {
    io.out(JSON.stringify(
      {
        tenant: use.tenant,
        [use.kind]: use.name,
        ...(server.id === undefined ? {} : { server: server.id }),
        verdict,
      },
      null,
      2,
    ));
    return 0;
  }
  const from = use.kind === "resource" ? "the URI" : "the prompt name";
  const where = server.id === undefined
    ? "no upstream server (no connector boundary)"
    : `upstream ${server.id}${server.inferred ? ` (from ${from}; --server overrides)` : ""}`;
  const scope = use.kind === "resource" ? "resources" : "prompts";
  io.out(`verdict:     ${verdict.action}${verdict.action === "deny" ? ` (${verdict.code})` : ""}`);
  io.out(
    `${use.kind}:${
      " ".repeat(12 - use.kind.length)
    }${use.name} for tenant "${use.tenant}", ${where}`,
  );
  io.out(`policy:      ${policies.files.join(", ") || "the built-in default"}`);
  io.out(`decided by:  ${verdict.rule ?? "no single rule (see the reason)"}`);
  if (verdict.action !== "allow") io.out(`reason:      ${verdict.reason}`);
  if (verdict.action === "allow") {
    const rules = tenantPolicy(policies, use.tenant)?.[scope].rateLimits ?? [];
    for (const rule of rules.filter((r) => r.match(use.name))) {
      io.out(
        `rate limit:  ${rule.source.file}:${rule.source.line} ${rule.source.text} (one bucket ` +
          `for every ${use.kind} it matches; not used by a dry run)`,
      );
    }
  }
  return 0;
}

/** A verdict in a few words: `allow (<rule>)`, `deny (<code>: <rule or reason>)`. */
function describeVerdict(verdict: Verdict): string {
  if (verdict.action === "deny") {
    return `deny (${verdict.code}: ${verdict.rule ?? verdict.reason})`;
  }
  return `${verdict.action} (${verdict.rule})`;
}

/** Whether a verdict meets a case's expectation. An approval's code is `approval_required`. */
function meets(verdict: Verdict, testCase: PolicyTestCase): boolean {
  if (verdict.action !== testCase.expect) return false;
  if (testCase.code === undefined) return true;
  return (verdict.action === "deny" ? verdict.code : verdict.action) === testCase.code;
}

/** Decides a case's call, read or get as the gateway would. */
async function decideCase(
  governance: ReturnType<typeof offlineGovernance>,
  testCase: PolicyTestCase,
  descriptors: Map<string, Tool>,
  separator: string,
): Promise<Verdict> {
  const server = testCase.server === undefined ? {} : { server: testCase.server };
  if (testCase.tool === undefined) {
    const use: ItemUse = {
      tenant: testCase.tenant,
      kind: testCase.resource === undefined ? "prompt" : "resource",
      name: (testCase.resource ?? testCase.prompt)!,
      ...server,
    };
    return decideItem(governance, use, itemServerOf(use, separator).id);
  }
  const call: Call = {
    tenant: testCase.tenant,
    tool: testCase.tool,
    args: testCase.arguments ?? {},
    ...(testCase.annotations === undefined
      ? {}
      : { annotations: testCase.annotations as Tool["annotations"] }),
    ...server,
  };
  const listed = descriptors.get(call.tool);
  return await decide(governance, call, targetOf(call, serverOf(call, separator).id, listed));
}

async function test(args: string[], io: PolicyCliIo): Promise<number> {
  const parsed = parseFlags(io, POLICY_HELP, {
    args,
    options: {
      path: { type: "string" },
      descriptors: { type: "string" },
      gateway: { type: "string" },
      token: { type: "string" },
    },
  });
  if (!parsed) return EXIT_USAGE;
  const path = policyPath(parsed.values.path, io);
  const policies = await load(path, io);
  const tests = await loadCases(path, io);
  if (!policies || !tests) return 1;
  const descriptors = await readDescriptors(parsed.values, io);
  if (typeof descriptors === "string") {
    io.err(descriptors);
    return 1;
  }
  const governance = offlineGovernance(policies);
  const separator = io.env.MCP_PROXY_TOOL_SEPARATOR ?? DEFAULT_SEPARATOR;
  let passed = 0;
  let failed = 0;
  for (const testCase of tests.cases) {
    const verdict = await decideCase(governance, testCase, descriptors, separator);
    const at = `${testCase.file}:${testCase.line} ${testCase.name}`;
    if (meets(verdict, testCase)) {
      passed++;
      io.out(`ok   ${at}`);
    } else {
      failed++;
      const expected = testCase.code === undefined
        ? testCase.expect
        : `${testCase.expect} (${testCase.code})`;
      io.out(`FAIL ${at}: expected ${expected}, got ${describeVerdict(verdict)}`);
    }
  }
  io.out(`${passed} passed, ${failed} failed`);
  if (tests.cases.length === 0) {
    io.err(
      tests.files.length === 0
        ? `No policy test cases found: add a *.test.yaml file of cases next to the policy at "${path}"`
        : `No policy test cases found in ${tests.files.join(", ")}: list them under cases:`,
    );
    return 1;
  }
  return failed > 0 ? 1 : 0;
}
