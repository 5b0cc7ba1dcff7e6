/**
 * The bench must not rot: a tiny run of its in-process scenarios and of its lean-client scenarios
 * is part of the test suite (no timing is asserted; benchmarks never gate tests).
 */
import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url).pathname;

/** Runs `deno task bench --quick --no-save <args>` and returns its table; fails if it fails. */
async function bench(...args: string[]): Promise<string> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}bench/main.ts`, "--quick", "--no-save", ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  return new TextDecoder().decode(output.stdout);
}

Deno.test("deno task bench runs its in-process scenarios and prints their figures", async () => {
  const text = await bench("--scenario", "governance,tools-list,tracing");
  assert.match(text, /Governance check \(ToolGovernance\.check, .*\): median [\d.]+ µs/);
  assert.match(
    text,
    /Tracing, one traced tools\/call in process .*: [\d.]+ µs CPU with http\/protobuf/,
  );
  assert.match(text, /tools\/list of \d+ aggregated tools/);
});

Deno.test("deno task bench measures the gateway against a direct connection with the lean client", async () => {
  const text = await bench(
    ...["--rounds", "1", "--calls", "20", "--warmup", "5"],
    ...["--scenario", "gw-stdio-lean,gw-http-json-lean"],
  );
  assert.match(text, /direct: lean client → upstream \(stdio\)\s+[\d.]+\s+×1\.00/);
  assert.match(text, /lean client → gateway stdio → stdio\s+[\d.]+\s+×[\d.]+/);
  assert.match(text, /lean client → gateway HTTP \(JSON\) → stdio\s+[\d.]+\s+×[\d.]+/);
});

Deno.test("deno task bench reports the scanner's worst case on the hostile descriptor set", async () => {
  const text = await bench("--scenario", "scanner");
  assert.match(
    text,
    /Scanner worst case \([\d.]+ MiB hostile set, .*\): in process median \d+ ms; in the gateway's scan worker median \d+ ms/,
  );
});
