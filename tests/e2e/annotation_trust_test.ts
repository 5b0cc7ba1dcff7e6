/**
 * An upstream's `readOnlyHint` is its own claim: it lowers its tools' effect class to read only
 * for servers the policy lists under `trusted_annotations`. With a real stdio upstream whose
 * "read-only" tool writes a file, and a real gateway and SDK client over Streamable HTTP.
 */
import assert from "node:assert/strict";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import type { GatewayEvent } from "../../core/bus/events.ts";
import { eventually, fixture, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

async function withLiar(
  policy: string,
  fn: (env: { gateway: TestGateway; notes: string; policyDir: string }) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "agent33-liar-" });
  const notes = `${dir}/notes.txt`;
  const fleet = await writeFleet(`proxy_servers:
  - id: notes
    command: ["deno", "run", "--config", "${DENO_JSON}", "${
    fixture("upstreams/read_only_liar_server.ts")
  }"]
    sandbox: deno
    env: { LIAR_NOTES_FILE: ${notes} }
    permissions: { env: [LIAR_NOTES_FILE], read: true, write: ["${dir}"] }
`);
  const policyDir = `${dir}/policy`;
  await Deno.mkdir(policyDir);
  await Deno.writeTextFile(`${policyDir}/policy.yaml`, policy);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: policyDir,
  });
  try {
    await gateway.kernel.fleetStarted;
    assert.equal(gateway.kernel.proxy.get("notes")?.state, "READY");
    await fn({ gateway, notes, policyDir });
  } finally {
    await gateway.stop();
    await fleet.remove();
    await Deno.remove(dir, { recursive: true });
  }
}

const written = (path: string) => Deno.readTextFile(path).then((t) => t, () => "");

const APPROVE_WRITES = `tenants:\n  "*":\n    approval: [write, destructive]\n`;

Deno.test("An upstream's readOnlyHint does not lower its tool's class: a write that needs approval is held", async () => {
  await withLiar(APPROVE_WRITES, async ({ gateway, notes }) => {
    const client = await connectHttp(gateway);
    try {
      const refused = await client.callTool({ name: "notes__refresh_index", arguments: {} }).then(
        () => assert.fail("a tool that only says it reads must not pass a write's approval"),
        (e: McpError) => e,
      );
      const data = refused.data as { code: string; request: { effect: string } };
      assert.equal(data.code, "approval_required");
      assert.equal(data.request.effect, "write");
      assert.equal(await written(notes), "", "the upstream was not called");
    } finally {
      await client.close();
    }
  });
});

Deno.test("A connector open to reads only refuses a tool that calls itself read-only", async () => {
  const policy = `tenants:\n  "*": {}\nconnectors:\n  notes: { tenants: "*", effects: [read] }\n`;
  await withLiar(policy, async ({ gateway, notes }) => {
    const client = await connectHttp(gateway);
    try {
      await assert.rejects(
        client.callTool({ name: "notes__refresh_index", arguments: {} }),
        (e: McpError) => (e.data as { code: string }).code === "effect_not_allowed",
      );
      assert.equal(await written(notes), "");
    } finally {
      await client.close();
    }
  });
});

Deno.test("trusted_annotations makes a listed upstream's readOnlyHint count again", async () => {
  await withLiar(APPROVE_WRITES, async ({ gateway, notes, policyDir }) => {
    const events: GatewayEvent[] = [];
    const unsubscribe = gateway.kernel.bus.subscribe((e) => void events.push(e));
    const client = await connectHttp(gateway);
    try {
      await Deno.writeTextFile(
        `${policyDir}/policy.yaml`,
        `${APPROVE_WRITES}trusted_annotations: [notes]\n`,
      );
      await eventually(() => events.some((e) => e.type === "policy.reloaded"), "the reload");
      const result = await client.callTool({ name: "notes__refresh_index", arguments: {} });
      assert.notEqual(result.isError, true);
      assert.equal(await written(notes), "written\n");
    } finally {
      unsubscribe();
      await client.close();
    }
  });
});
