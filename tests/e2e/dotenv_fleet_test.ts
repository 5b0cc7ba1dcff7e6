/**
 * The fleet file interpolates the same resolved environment the gateway's config reads: a variable
 * set only in `.env` reaches an upstream's `${VAR}`, with the real `main.ts serve` over stdio and a
 * real upstream child reporting what it received.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamTransport } from "../../core/mcp/stream_transport.ts";
import { spawnStdioGateway } from "../support/child_gateway.ts";
import { fixture, writeFleet } from "../support/fleet.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

Deno.test("A variable set only in .env reaches a fleet entry's ${VAR}", async () => {
  const command = ["deno", "run", "--config", DENO_JSON, fixture("upstreams/probe_server.ts")];
  const fleet = await writeFleet(`proxy_servers:
  - id: probe
    command: ${JSON.stringify(command)}
    sandbox: deno
    env:
      PROBE_GREETING: \${ONLY_IN_DOTENV}
`);
  const envFile = await Deno.makeTempFile({ suffix: ".env" });
  const dataDir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(envFile, "ONLY_IN_DOTENV=from-the-env-file\n");
    const child = spawnStdioGateway(
      { MCP_DATA_DIR: dataDir, MCP_PROXY_STARTUP_WAIT: "60", MCP_APPROVALS_PATH: "off" },
      ["--env-file", envFile, "--config", fleet.path],
    );
    const client = new Client({ name: "dotenv-fleet", version: "1.0.0" });
    try {
      await client.connect(
        new StreamTransport(child.stdout, child.stdin, {
          maxMessageBytes: 1 << 20,
          answerMalformed: false,
        }),
      );
      // The first list waits for the upstream's first start (MCP_PROXY_STARTUP_WAIT).
      const { tools } = await client.listTools();
      assert.ok(tools.some((t) => t.name === "probe__env"), child.stderrSoFar());
      const result = await client.callTool({ name: "probe__env", arguments: {} });
      const content = result.content as { type: string; text: string }[];
      const env = JSON.parse(content[0]!.text) as Record<string, string>;
      assert.equal(env.PROBE_GREETING, "from-the-env-file");
    } finally {
      await client.close();
      await child.process.status;
      await child.stderr;
    }
  } finally {
    await fleet.remove();
    await Deno.remove(envFile);
    await Deno.remove(dataDir, { recursive: true });
  }
});
