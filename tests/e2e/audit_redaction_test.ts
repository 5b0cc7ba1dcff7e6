/**
 * The audit file is redacted like the log: a real gateway writing its audit file, a real stdio
 * upstream whose env holds a registered secret (tests/fixtures/upstreams/leaky_server.ts), and an
 * SDK client that puts the secret in a tool's arguments, a resource URI and a prompt name, and
 * gets the upstream's error quoting it. The secret never reaches the file, even with raw
 * arguments switched on.
 */
import assert from "node:assert/strict";
import { fixtureCommand, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway } from "../support/gateway.ts";

const SECRET = "Kx81-audit-S3cr3t-value";

Deno.test("A registered secret in arguments, a tool's error reason or a resource URI never reaches the audit file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "agent33-audit-" });
  const command = fixtureCommand("upstreams/leaky_server.ts");
  const fleet = await writeFleet(`proxy_servers:
  - id: leaky
    command: ${JSON.stringify(command)}
    env: { LEAKY_PLAIN: "${SECRET}" }
`);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_AUDIT_LOG: `${dir}/audit.jsonl`,
    MCP_AUDIT_INCLUDE_ARGUMENTS: "true",
  });
  const client = await connectHttp(gateway);
  try {
    await gateway.kernel.fleetStarted;
    const failed = await client.callTool({ name: "leaky__fail", arguments: { note: SECRET } });
    // Not vacuous: the upstream's error quoted it (the client sees it redacted too).
    assert.equal(failed.isError, true);
    for (const uri of [`leaky://notes/${SECRET}`, `https://x.example/r?token=${SECRET}`]) {
      await client.readResource({ uri }).catch(
        () => {/* refused or unknown: audited either way */},
      );
    }
    await client.getPrompt({ name: `p-${SECRET}` }).catch(() => {});
    await gateway.kernel.audit.flush();
    const file = await Deno.readTextFile(`${dir}/audit.jsonl`);
    const lines = file.trim().split("\n").map((l) => JSON.parse(l));
    assert.ok(lines.some((l) => l.tool === "leaky__fail" && l.arguments?.note === "[redacted]"));
    assert.ok(lines.some((l) => l.surface === "resources/read"), file);
    assert.ok(!file.includes(SECRET), file);
    assert.ok(!file.includes("S3cr3t"), file);
  } finally {
    await client.close();
    await gateway.stop();
    await fleet.remove();
    await Deno.remove(dir, { recursive: true });
  }
});
