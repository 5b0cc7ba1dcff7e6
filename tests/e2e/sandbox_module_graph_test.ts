/**
 * The module graph check of sandbox: deno (docs/security.md), with real processes: Deno loads a
 * program's imported files without the read check, so a sandboxed upstream whose code imports a
 * secret as text is refused before it starts, naming the file, and starts once the file is granted.
 */
import assert from "node:assert/strict";
import { eventually, fixture, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";

/** The file tests/fixtures/upstreams/text_import_server.ts imports, outside its directory. */
const SECRET_FILE = fixture("module_graph_secret.env");

/** Runs `fn` on a gateway serving the text-importing fixture (or `command`) under sandbox: deno. */
async function withImporter(
  extra: string,
  fn: (gateway: TestGateway, secret: string) => Promise<void>,
  command = ["deno", "run", fixture("upstreams/text_import_server.ts")],
): Promise<void> {
  const secret = (await Deno.readTextFile(SECRET_FILE)).trim();
  const fleet = await writeFleet(`proxy_servers:
  - id: importer
    command: ${JSON.stringify(command)}
    sandbox: deno
${extra}`);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway, secret);
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
}

function importer(gateway: TestGateway) {
  return gateway.kernel.proxy.status().find((s) => s.id === "importer");
}

Deno.test("A sandboxed upstream whose code imports a file outside its directory is refused, naming the file and the fix", async () => {
  await withImporter("", async (gateway, secret) => {
    await eventually(() => importer(gateway)?.lastError !== undefined, "the refusal");
    const status = importer(gateway)!;
    assert.equal(status.state, "FAILED");
    assert.match(status.lastError!, /Upstream "importer" runs under sandbox: deno/);
    assert.match(
      status.lastError!,
      /imports \S*tests\/fixtures\/module_graph_secret\.env, outside/,
    );
    assert.match(status.lastError!, /permissions\.read/);
    assert.match(status.lastError!, /sandbox: none/);
    const client = await connectHttp(gateway);
    try {
      const { tools } = await client.listTools();
      assert.equal(tools.some((t) => t.name.startsWith("importer__")), false);
      await assert.rejects(
        client.callTool({ name: "importer__secret", arguments: {} }),
        (error: Error) => /is FAILED/.test(error.message) && !error.message.includes(secret),
      );
    } finally {
      await client.close();
    }
    assert.equal(gateway.logs.some((line) => line.includes(secret)), false, "the secret in a log");
  });
});

Deno.test("The same upstream starts, and reads the file, once permissions.read grants it", async () => {
  await withImporter(
    `    permissions: { read: ["${SECRET_FILE}"] }\n`,
    async (gateway, secret) => {
      await eventually(() => importer(gateway)?.state === "READY", "the start");
      const client = await connectHttp(gateway);
      try {
        const result = await client.callTool({ name: "importer__secret", arguments: {} });
        const content = result.content as { type: string; text: string }[];
        assert.equal(content[0]!.text.trim(), secret);
      } finally {
        await client.close();
      }
    },
  );
});

Deno.test("A sandboxed upstream whose --preload module imports a file outside its directory is refused, and the secret reaches no log", async () => {
  // The entry imports only its own directory; the module preloaded before it reads the secret.
  const command = [
    "deno",
    "run",
    "--preload",
    fixture("upstreams/secret_preload.ts"),
    fixture("upstreams/log_flood_server.ts"),
  ];
  await withImporter("", async (gateway, secret) => {
    await eventually(
      () => importer(gateway)?.lastError !== undefined || importer(gateway)?.state === "READY",
      "the refusal (or the start)",
    );
    assert.equal(gateway.logs.some((line) => line.includes(secret)), false, "the secret in a log");
    const status = importer(gateway)!;
    assert.equal(status.state, "FAILED");
    assert.match(
      status.lastError!,
      /its module \S*secret_preload\.ts imports \S*module_graph_secret\.env/,
    );
  }, command);
});
