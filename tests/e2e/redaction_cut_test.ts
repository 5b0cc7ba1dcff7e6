/**
 * A secret crossing a diagnostic's length cut leaves no beginning behind: a real stdio child prints
 * its registered secret across the 300-character cut of a `lastError` line and the 2,000-character
 * cut of a forwarded stderr line (tests/fixtures/upstreams/straddling_stderr.ts), and no prefix
 * of it of 4 characters or more reaches `lastError`, the operator status or the log.
 */
import assert from "node:assert/strict";
import { eventually, fixtureCommand, writeFleet } from "../support/fleet.ts";
import { startGateway } from "../support/gateway.ts";

const SECRET = "Qv7Zk2LmPwR9sTbXe4Yh";

Deno.test("A registered secret straddling a diagnostic's cut leaves no prefix in lastError, status or log", async () => {
  const command = fixtureCommand("upstreams/straddling_stderr.ts");
  const fleet = await writeFleet(`proxy_servers:
  - id: straddle
    command: ${JSON.stringify(command)}
    env: { STRADDLE_SECRET: "${SECRET}" }
    breaker: { threshold: 5, base: 60, max: 60 }
`);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  try {
    await gateway.kernel.fleetStarted;
    await eventually(
      () => (gateway.kernel.proxy.get("straddle")!.snapshot().lastError ?? "").includes("| x"),
      "both stderr lines in the child's last error",
    );
    const lastError = gateway.kernel.proxy.get("straddle")!.snapshot().lastError!;
    const status = await (await fetch(`${gateway.url}/v1/operator/status`, {
      headers: { Authorization: `Bearer ${gateway.adminToken}` },
    })).text();
    const log = gateway.logs.join("\n");
    // Not vacuous: the lines were kept and logged, cut where the secret was.
    assert.match(lastError, /x{294}\[redac/);
    assert.ok(log.includes("x".repeat(1900)), "the 2,000-character line was logged");
    for (const [sink, text] of Object.entries({ lastError, status, log })) {
      assert.ok(!text.includes(SECRET.slice(0, 4)), `${sink} holds the secret's beginning`);
    }
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
});
