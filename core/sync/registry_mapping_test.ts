import assert from "node:assert/strict";
import { slugOf, toFleetEntry, uniqueId } from "./registry_mapping.ts";

Deno.test("A registry name slugs to the namespace's last label and the name, valid as a fleet id", () => {
  assert.equal(slugOf("io.github.acme/weather"), "acme-weather");
  assert.equal(slugOf("com.example/Search_API"), "example-search-api");
  assert.equal(slugOf("io.github.x/a.b"), "x-a-b");
});

Deno.test("A slug already taken gets the next free -N suffix", () => {
  assert.equal(
    uniqueId("acme-weather", new Set(["acme-weather", "acme-weather-2"])),
    "acme-weather-3",
  );
});

const OPTIONS = { env: {}, allow: new Set<string>(), trusted: true, dataDir: "/data/servers" };
const npm = (extra: Record<string, unknown>) => ({
  name: "io.github.acme/tool",
  version: "1.0.0",
  packages: [{ registryType: "npm", identifier: "acme-tool", version: "1.0.0", ...extra }],
});

Deno.test("Package arguments map to argv: named as flag and value, positional as value, paths to the server's own directory", () => {
  const mapped = toFleetEntry(
    npm({
      packageArguments: [
        { type: "named", name: "--mode", value: "fast" },
        { type: "named", name: "--verbose", format: "boolean", isRequired: true },
        { type: "named", name: "--optional" },
        { type: "positional", valueHint: "root_path", default: "/etc" },
      ],
    }),
    "acme-tool",
    OPTIONS,
  );
  assert.ok("entry" in mapped);
  assert.deepEqual(mapped.entry.command, [
    "deno",
    "run",
    "npm:acme-tool@1.0.0",
    "--mode",
    "fast",
    "--verbose",
    "/data/servers/acme-tool",
  ]);
  assert.deepEqual(mapped.paths, ["/data/servers/acme-tool"]);
  assert.equal(mapped.entry.enabled, undefined, "trusted and complete: enabled");
});

Deno.test("A required argument without a value, or a secret one, skips the server with the reason", () => {
  for (
    const argument of [
      { type: "positional", valueHint: "api_token", isRequired: true },
      { type: "named", name: "--token", isSecret: true, value: "x" },
    ]
  ) {
    const mapped = toFleetEntry(npm({ packageArguments: [argument] }), "acme-tool", OPTIONS);
    assert.ok("skip" in mapped);
    assert.match(mapped.skip, /add the server by hand|does not put on a command line/);
  }
});

Deno.test("Runtime arguments other than npx's -y are not passed and leave the entry disabled, named", () => {
  const mapped = toFleetEntry(
    npm({ runtimeArguments: [{ type: "named", name: "--node-options", value: "x" }] }),
    "acme-tool",
    OPTIONS,
  );
  assert.ok("entry" in mapped);
  assert.equal(mapped.entry.enabled, false);
  assert.match(mapped.notes.join(), /runtime arguments for npx\/node \(--node-options\)/);
});

Deno.test("A registry never gets a gateway variable: MCP_* stays a reference the entry cannot resolve, and disabled", () => {
  const mapped = toFleetEntry(
    npm({ environmentVariables: [{ name: "MCP_APPROVAL_SECRET", isRequired: true }] }),
    "acme-tool",
    { ...OPTIONS, allow: new Set(["MCP_APPROVAL_SECRET"]), env: { MCP_APPROVAL_SECRET: "s" } },
  );
  assert.ok("entry" in mapped);
  assert.equal(mapped.entry.enabled, false);
  assert.deepEqual(mapped.entry.env, { MCP_APPROVAL_SECRET: "${MCP_APPROVAL_SECRET}" });
  assert.match(mapped.notes.join(), /MCP_APPROVAL_SECRET, which is not in MCP_SYNC_ENV_ALLOW/);
});

Deno.test("A remote URL with credentials, a reference or another scheme is refused", () => {
  for (
    const url of [
      "https://user:pass@evil.example/mcp",
      "https://evil.example/mcp?k=${MCP_SERVER_AUTH_TOKEN}",
      "file:///etc/passwd",
    ]
  ) {
    const mapped = toFleetEntry(
      { name: "io.github.acme/r", version: "1.0.0", remotes: [{ type: "sse", url }] },
      "acme-r",
      OPTIONS,
    );
    assert.ok("skip" in mapped, url);
    assert.match(mapped.skip, /^refused: remote url/);
  }
});
