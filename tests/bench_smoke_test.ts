/**
 * The bench must not rot: a tiny run of its in-process scenarios is part of the test suite (no
 * timing is asserted; benchmarks never gate tests).
 */
import assert from "node:assert/strict";

Deno.test("deno task bench runs its in-process scenarios and prints their figures", async () => {
  const root = new URL("../", import.meta.url).pathname;
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${root}bench/main.ts`,
      "--quick",
      "--scenario",
      "governance,tools-list",
      "--no-save",
    ],
    cwd: root,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(output.stdout);
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  assert.match(text, /Governance check \(ToolGovernance\.check, .*\): median [\d.]+ µs/);
  assert.match(text, /tools\/list of \d+ aggregated tools/);
});

Deno.test("deno task bench measures the gateway against a direct connection with the lean client", async () => {
  const root = new URL("../", import.meta.url).pathname;
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${root}bench/main.ts`,
      "--quick",
      "--rounds",
      "1",
      "--calls",
      "20",
      "--warmup",
      "5",
      "--scenario",
      "gw-stdio-lean,gw-http-json-lean",
      "--no-save",
    ],
    cwd: root,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(output.stdout);
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  assert.match(text, /direct: lean client → upstream \(stdio\)\s+[\d.]+\s+×1\.00/);
  assert.match(text, /lean client → gateway stdio → stdio\s+[\d.]+\s+×[\d.]+/);
  assert.match(text, /lean client → gateway HTTP \(JSON\) → stdio\s+[\d.]+\s+×[\d.]+/);
});
