/**
 * The soak in its short form (the full one is `deno task soak`): every request answered exactly
 * once while upstreams are killed, the fleet recovers, no child process outlives the gateway.
 */
import assert from "node:assert/strict";
import { runSoak } from "./soak.ts";

Deno.test("soak (short): every call answered exactly once while upstreams are killed; recovery; no leaked processes", async () => {
  const result = await runSoak({ calls: 1500, concurrency: 32, upstreams: 3, killEveryMs: 400 });
  assert.equal(result.missing, 0, JSON.stringify(result));
  assert.equal(result.duplicates, 0, JSON.stringify(result));
  assert.equal(result.answered, result.calls);
  assert.ok(result.kills >= 1, "at least one upstream was killed during the run");
  assert.deepEqual(result.leakedProcesses, []);
  assert.deepEqual(Object.values(result.finalStates), ["READY", "READY", "READY"]);
});
