/**
 * The official MCP conformance suite against the gateway's Streamable HTTP endpoint: the scenarios
 * whose surfaces the gateway itself serves. (Scenarios that call fixed fixture tools such as
 * `test_simple_text` run against a fixture upstream behind the gateway.)
 */
import assert from "node:assert/strict";
import { startGateway } from "../support/gateway.ts";

const CONFORMANCE = "npm:@modelcontextprotocol/conformance@0.1.16";

/** Scenarios for surfaces the gateway serves natively. */
export const GATEWAY_SCENARIOS = [
  "server-initialize",
  "ping",
  "logging-set-level",
  "tools-list",
  "resources-list",
  "prompts-list",
  "completion-complete",
  "dns-rebinding-protection",
];

/** Runs one conformance scenario against `url`; returns passed/total and the output. */
export async function runScenario(url: string, scenario: string) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CONFORMANCE, "server", "--url", url, "--scenario", scenario],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
  const match = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(text);
  return {
    passed: Number(match?.[1] ?? 0),
    total: Number(match?.[2] ?? -1),
    failed: Number(match?.[3] ?? -1),
    code: output.code,
    text,
  };
}

Deno.test("The official conformance suite passes the gateway's own scenarios over Streamable HTTP", async () => {
  // The suite sends no credentials: --no-auth, which the kernel accepts only on loopback.
  const gateway = await startGateway({}, { noAuth: true });
  try {
    for (const scenario of GATEWAY_SCENARIOS) {
      const result = await runScenario(`${gateway.url}/mcp`, scenario);
      assert.ok(
        result.total > 0 && result.failed === 0 && result.passed === result.total,
        `conformance scenario ${scenario} failed:\n${result.text}`,
      );
    }
  } finally {
    await gateway.stop();
  }
});
