/**
 * The bench's cluster scenario must not rot: a quick run of it (no timing is asserted; benchmarks
 * never gate tests) on a real local cluster.
 */
import assert from "node:assert/strict";
import { NEEDS_CLUSTER } from "../support/cluster.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

Deno.test(
  "deno task bench --scenario cluster measures the shared state and 1 against 3 replicas",
  NEEDS_CLUSTER,
  async () => {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `${ROOT}bench/main.ts`, "--quick", "--no-save", "--rounds", "1"]
        .concat(["--scenario", "cluster"]),
      cwd: ROOT,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(output.stdout);
    assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
    assert.match(
      text,
      /shared session state per call: cache hit median [\d.]+ µs, p99 [\d.]+ µs; cold replica \(one KV read\) median [\d.]+ µs/,
    );
    assert.match(text, /end to end .*: [\d.]+ ms against [\d.]+ ms with MCP_CLUSTER off/);
    assert.match(text, /1 replica \d+ calls\/s .*, 3 replicas \d+ calls\/s .* = ×[\d.]+/);
  },
);
