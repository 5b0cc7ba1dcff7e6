/**
 * `sandbox: deno` as an attacker meets it, through the whole gateway with real child processes:
 * no remote imports, no files outside the declared paths, an environment holding only what the
 * fleet gives the child, and a failure that says what went wrong in one plain line.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { BASE_ENV_NAMES } from "../../core/proxy/upstream_transports.ts";
import { fixture, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

/** A fleet entry for the probe fixture under sandbox: deno; `extra` is more YAML (4-space indent). */
function probeServer(id: string, extra = ""): string {
  const command = ["deno", "run", "--config", DENO_JSON, fixture("upstreams/probe_server.ts")];
  return `
  - id: ${id}
    command: ${JSON.stringify(command)}
    sandbox: deno
${extra}`;
}

async function withProbe(
  servers: string,
  fn: (gateway: TestGateway, client: Client) => Promise<void>,
): Promise<void> {
  const fleet = await writeFleet(`proxy_servers:${servers}`);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  try {
    await gateway.kernel.fleetStarted;
    const client = await connectHttp(gateway);
    try {
      await fn(gateway, client);
    } finally {
      await client.close();
    }
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
}

/** The text of a tool result's first content block. */
function text(result: Record<string, unknown>): string {
  return (result.content as { type: string; text: string }[])[0]!.text;
}

Deno.test("A sandboxed child's remote import is refused by the permission check, for Deno's default hosts too", async () => {
  await withProbe(probeServer("probe"), async (_gateway, client) => {
    for (
      const [specifier, host] of [
        ["https://deno.land/x/std@0.224.0/fmt/colors.ts", "deno.land:443"],
        ["https://esm.sh/lodash-es@4.17.21", "esm.sh:443"],
        ["https://raw.githubusercontent.com/x/y/main/mod.ts", "raw.githubusercontent.com:443"],
        ["jsr:@std/fmt@1/colors", "jsr.io:443"],
        ["https://evil.example/payload.js", "evil.example:443"],
        // A data: module's own static import goes through the same check.
        [
          `data:application/javascript,${encodeURIComponent('import "https://deno.land/x/a.ts";')}`,
          "deno.land:443",
        ],
      ]
    ) {
      const result = await client.callTool({ name: "probe__import", arguments: { specifier } });
      assert.equal(result.isError, true, specifier);
      // The permission, not the network: nothing was fetched.
      assert.match(text(result), new RegExp(`Requires import access to "${host}"`), specifier);
    }
  });
});

Deno.test("A sandboxed child cannot read a file outside its declared paths, directly or by importing it", async () => {
  const granted = await Deno.makeTempDir({ prefix: "agent33-granted-" });
  const secrets = await Deno.makeTempDir({ prefix: "agent33-secrets-" });
  await Deno.writeTextFile(`${granted}/notes.json`, '{"visible":true}');
  await Deno.writeTextFile(`${secrets}/credentials.json`, '{"token":"s3cr3t"}');
  try {
    await withProbe(
      probeServer("reader", `    permissions: { read: ["${granted}"] }\n`),
      async (_gateway, client) => {
        const inside = await client.callTool({
          name: "reader__read_file",
          arguments: { path: `${granted}/notes.json` },
        });
        assert.equal(text(inside), '{"visible":true}');
        const read = await client.callTool({
          name: "reader__read_file",
          arguments: { path: `${secrets}/credentials.json` },
        });
        assert.equal(read.isError, true);
        assert.match(text(read), /^NotCapable: Requires read access to ".*credentials\.json"/);
        const imported = await client.callTool({
          name: "reader__import",
          arguments: { specifier: `file://${secrets}/credentials.json`, json: true },
        });
        assert.equal(imported.isError, true);
        assert.match(text(imported), /Requires read access to ".*credentials\.json"/);
        assert.doesNotMatch(text(imported), /s3cr3t/);
      },
    );
  } finally {
    await Deno.remove(granted, { recursive: true });
    await Deno.remove(secrets, { recursive: true });
  }
});

Deno.test("A sandboxed child reads its environment, which holds only the base variables and its own env", async () => {
  // A variable of the gateway's own process that no child is given.
  Deno.env.set("AGENT33_GATEWAY_ONLY_SECRET", "do-not-leak");
  try {
    await withProbe(
      probeServer("envs", "    env: { UPSTREAM_TOKEN: t0k3n }\n"),
      async (_gateway, client) => {
        const env = JSON.parse(text(await client.callTool({ name: "envs__env", arguments: {} })));
        assert.equal(env.UPSTREAM_TOKEN, "t0k3n");
        assert.equal(env.AGENT33_GATEWAY_ONLY_SECRET, undefined);
        const allowed = new Set<string>([...BASE_ENV_NAMES, "UPSTREAM_TOKEN"]);
        const extra = Object.keys(env).filter((name) => !allowed.has(name));
        assert.deepEqual(extra, [], "variables beyond the base set and the server's env");
      },
    );
  } finally {
    Deno.env.delete("AGENT33_GATEWAY_ONLY_SECRET");
  }
});

Deno.test("A sandboxed child that dies of a permission error shows that error's first line, without escapes, in lastError and the log", async () => {
  const secrets = await Deno.makeTempDir({ prefix: "agent33-secrets-" });
  const target = `${secrets}/key.pem`;
  await Deno.writeTextFile(target, "key");
  try {
    await withProbe(
      probeServer("dies", `    env: { PROBE_READ_AT_START: "${target}" }\n`),
      (gateway) => {
        const handle = gateway.kernel.proxy.get("dies")!;
        assert.equal(handle.state, "FAILED");
        const lastError = handle.snapshot().lastError ?? "";
        // The path came from the entry's env, and every fleet env value is a registered secret,
        // so diagnostics show it redacted (core/support/redact.ts); the error's first line is what counts.
        assert.match(
          lastError,
          /stderr: error: Uncaught (?:\(in promise\) )?NotCapable: Requires read access to "\[redacted\]"/,
        );
        assert.ok(!lastError.includes(target), "the env-given path is redacted");
        assert.ok(!lastError.includes("\x1b"), "no escapes in lastError");
        // The frames are folded into that line, not left to fill the stderr tail.
        assert.doesNotMatch(lastError, /\|\s+at /);
        const logged = gateway.logs.filter((line) => line.includes("server=dies"));
        assert.ok(logged.some((line) => line.includes("NotCapable: Requires read access")));
        assert.ok(logged.every((line) => !line.includes("\x1b")), "no escapes in the log");
        return Promise.resolve();
      },
    );
  } finally {
    await Deno.remove(secrets, { recursive: true });
  }
});
