import assert from "node:assert/strict";
import { GatewayError } from "../support/errors.ts";
import { parseFleetConfig } from "./fleet_config.ts";

const DEFAULTS = { separator: "__", healthIntervalSeconds: 30 };
const ENV = {
  MCP_APPROVAL_SECRET: "approval-secret",
  GITHUB_TOKEN: "gh-token",
  MCP_SYNC_ENV_ALLOW: "GITHUB_TOKEN,MCP_APPROVAL_SECRET",
};

function problems(text: string, env: Record<string, string> = ENV): string[] {
  try {
    parseFleetConfig(text, "fleet.yaml", env, DEFAULTS);
  } catch (error) {
    assert.ok(error instanceof GatewayError);
    return (error.data.problems as string[]).map(String);
  }
  return [];
}

const entry = (marker: string, value: string, enabled = true) =>
  `proxy_servers:\n${marker}  - id: x\n    command: ["deno", "run", "x.ts"]\n` +
  `    env:\n      V: "${value}"\n${enabled ? "" : "    enabled: false\n"}`;

Deno.test("The operator's own entry may reference any variable, gateway variables included", () => {
  const config = parseFleetConfig(entry("", "${MCP_APPROVAL_SECRET}"), "fleet.yaml", ENV, DEFAULTS);
  assert.equal(config.servers[0]?.env.V, "approval-secret");
});

Deno.test("A synced or discovered entry never references a gateway variable, even when allowed", () => {
  for (const marker of ["# synced from registry: io.github.a/b@1.0.0", "# discovered by lan: b"]) {
    const found = problems(entry(`  ${marker}\n`, "x${MCP_APPROVAL_SECRET:-}"));
    assert.equal(found.length, 1, marker);
    assert.match(
      found[0]!,
      /fleet\.yaml:6: .*variable MCP_APPROVAL_SECRET is a gateway variable \(MCP_\*\)/,
    );
    assert.match(found[0]!, /marker on line 2.*delete the marker line to adopt the entry/);
  }
});

Deno.test("A synced entry references only variables in MCP_SYNC_ENV_ALLOW", () => {
  const marker = "  # synced from registry: io.github.a/b@1.0.0\n";
  const allowed = parseFleetConfig(entry(marker, "${GITHUB_TOKEN}"), "fleet.yaml", ENV, DEFAULTS);
  assert.equal(allowed.servers[0]?.env.V, "gh-token");
  const found = problems(entry(marker, "${HOME}"));
  assert.equal(found.length, 1);
  assert.match(
    found[0]!,
    /variable HOME is not in MCP_SYNC_ENV_ALLOW.*add HOME to MCP_SYNC_ENV_ALLOW/,
  );
  // With nothing allowed (the default), not even the token.
  assert.equal(problems(entry(marker, "${GITHUB_TOKEN}"), { GITHUB_TOKEN: "t" }).length, 1);
});

Deno.test("A disabled synced entry keeps a refused reference as written, unresolved", () => {
  const marker = "  # synced from registry: io.github.a/b@1.0.0\n";
  const config = parseFleetConfig(
    entry(marker, "${MCP_APPROVAL_SECRET}", false),
    "fleet.yaml",
    ENV,
    DEFAULTS,
  );
  assert.equal(config.servers[0]?.env.V, "${MCP_APPROVAL_SECRET}");
});
