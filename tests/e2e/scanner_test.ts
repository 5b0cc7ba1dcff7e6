/**
 * `main.ts scan` as a subprocess: against the poisoned fixture, server-everything, snapshots,
 * pins, SARIF and an unreachable server.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("../../main.ts", import.meta.url));
const POISONED = fileURLToPath(new URL("../fixtures/poisoned_server.ts", import.meta.url));
const POISONED_CMD = `"${Deno.execPath()}" run -A "${POISONED}"`;
const EVERYTHING_CMD =
  `"${Deno.execPath()}" run --no-config -A npm:@modelcontextprotocol/server-everything@2026.8.31 stdio`;

interface Finding {
  rule: string;
  severity: string;
  entity: { name: string };
}

async function scan(args: string[], env: Record<string, string> = {}) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, "scan", ...args],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
}

function findings(stdout: string): Finding[] {
  return JSON.parse(stdout).findings;
}

Deno.test("scan --stdio flags the poisoned fixture and exits 1", async () => {
  const { code, stdout } = await scan([
    "--stdio",
    POISONED_CMD,
    "--id",
    "poisoned",
    "--format",
    "json",
  ]);
  assert.equal(code, 1);
  const hits = findings(stdout).map((f) => `${f.rule}:${f.entity.name}`);
  for (
    const expected of [
      "hidden-instruction-tag:add",
      "unicode-obfuscation:lookup",
      "exfiltration:sync_notes",
      "cross-server-shadowing:helper",
    ]
  ) assert.ok(hits.includes(expected), `${expected} in ${hits.join(", ")}`);
});

Deno.test("scan --stdio finds nothing high or critical in server-everything", async () => {
  const { code, stdout, stderr } = await scan(["--stdio", EVERYTHING_CMD, "--format", "json"]);
  assert.equal(code, 0, stderr);
  const severe = findings(stdout).filter((f) => f.severity === "high" || f.severity === "critical");
  assert.deepEqual(severe, []);
});

Deno.test("scan --save writes a snapshot that --descriptors scans the same way", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const live = await scan([
      "--stdio",
      POISONED_CMD,
      "--id",
      "poisoned",
      "--format",
      "json",
      "--save",
      `${dir}/snap.json`,
    ]);
    const saved = await scan(["--descriptors", `${dir}/snap.json`, "--format", "json"]);
    assert.equal(saved.code, 1);
    const ids = (s: string) => findings(s).map((f) => f.rule + f.entity.name).sort();
    assert.deepEqual(ids(saved.stdout), ids(live.stdout));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("scan --pinned reports a changed description as a critical rug pull", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const pin = await scan(["--stdio", POISONED_CMD, "--id", "p", "--pin", `${dir}/lock.json`]);
    assert.equal(pin.code, 1);
    const same = await scan([
      "--stdio",
      POISONED_CMD,
      "--id",
      "p",
      "--pinned",
      `${dir}/lock.json`,
      "--format",
      "json",
    ]);
    assert.deepEqual(findings(same.stdout).filter((f) => f.rule.startsWith("rug")), []);
    const changed = await scan(
      ["--stdio", POISONED_CMD, "--id", "p", "--pinned", `${dir}/lock.json`, "--format", "json"],
      { POISONED_VARIANT: "changed" },
    );
    const rug = findings(changed.stdout).filter((f) => f.rule === "rug-pull");
    assert.deepEqual(rug.map((f) => [f.entity.name, f.severity]), [["get_fact", "critical"]]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("scan --format sarif writes a SARIF 2.1.0 log to --output", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { code } = await scan([
      "--stdio",
      POISONED_CMD,
      "--format",
      "sarif",
      "--output",
      `${dir}/out.sarif`,
    ]);
    assert.equal(code, 1);
    const sarif = JSON.parse(await Deno.readTextFile(`${dir}/out.sarif`));
    assert.equal(sarif.version, "2.1.0");
    const run = sarif.runs[0];
    assert.equal(run.tool.driver.name, "agent33-scan");
    assert.ok(run.results.length > 0);
    for (const r of run.results) {
      assert.equal(run.tool.driver.rules[r.ruleIndex].id, r.ruleId);
      assert.ok(r.partialFingerprints["agent33Finding/v1"]);
      assert.ok(r.locations[0].logicalLocations[0].fullyQualifiedName.startsWith("stdio/"));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("scan exits 2 when a server cannot be reached", async () => {
  const { code, stdout } = await scan([
    "--stdio",
    "agent33-no-such-command-xyz",
    "--format",
    "json",
  ]);
  assert.equal(code, 2);
  assert.equal(JSON.parse(stdout).complete, false);
  const url = await scan(["--url", "http://127.0.0.1:9/mcp", "--timeout", "5", "--format", "json"]);
  assert.equal(url.code, 2);
});

Deno.test("scan --suppressions hides accepted findings until they expire", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/s.yaml`,
      `suppressions:\n  - rule: "*"\n    justification: fixture is poisoned on purpose\n    expires: 2999-01-01\n`,
    );
    const ok = await scan(["--stdio", POISONED_CMD, "--suppressions", `${dir}/s.yaml`]);
    assert.equal(ok.code, 0, ok.stdout);
    await Deno.writeTextFile(
      `${dir}/s.yaml`,
      `suppressions:\n  - rule: "*"\n    justification: old\n    expires: 2001-01-01\n`,
    );
    const expired = await scan(["--stdio", POISONED_CMD, "--suppressions", `${dir}/s.yaml`]);
    assert.equal(expired.code, 1);
    assert.match(expired.stderr, /expired on 2001-01-01/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
