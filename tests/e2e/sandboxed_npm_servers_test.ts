/**
 * Popular MCP servers from npm run under `sandbox: deno` with only the settings their READMEs
 * document (their `npx` command, their env) and the grants they need declared: each starts,
 * lists its tools and answers a call through the gateway. Real packages in real processes, fetched
 * by Deno from npm on first run, so the timeouts are generous.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { EVERYTHING, FILESYSTEM, MEMORY, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway } from "../support/gateway.ts";

const SEQUENTIAL_THINKING = "@modelcontextprotocol/server-sequential-thinking@2026.8.31";
const TIME = "time-mcp@1.0.6";
const GIT = "@cyanheads/git-mcp-server@2.15.3";
const CONTEXT7 = "@upstash/context7-mcp@4.1.1";

/** `npx -y <pkg>` for one of the pinned `npm:` specifiers of tests/support/fleet.ts. */
const npx = (specifier: string, ...args: string[]) =>
  JSON.stringify(["npx", "-y", specifier.replace(/^npm:/, ""), ...args]);

/** Starts a gateway with one sandboxed server, checks it is READY, and runs `fn` with a client. */
async function withServer(
  id: string,
  entry: string,
  fn: (client: Client) => Promise<void>,
): Promise<void> {
  const fleet = await writeFleet(`proxy_servers:\n  - id: ${id}\n    sandbox: deno\n${entry}`);
  // First runs download the package; the defaults are tuned for servers already cached.
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  try {
    await gateway.kernel.fleetStarted;
    const snapshot = gateway.kernel.proxy.get(id)!.snapshot();
    assert.equal(snapshot.state, "READY", snapshot.lastError);
    const client = await connectHttp(gateway);
    try {
      await fn(client);
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

async function toolNames(client: Client, prefix: string): Promise<string[]> {
  return (await client.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith(prefix));
}

/** Generous: a cold cache fetches the package and its dependencies from npm. */
const slow = { sanitizeOps: true, sanitizeResources: true };
const CONNECT = "    timeouts: { connect: 120, call: 60 }\n";

Deno.test({
  ...slow,
  name: "server-everything runs under sandbox: deno with no grants",
  async fn() {
    await withServer(
      "everything",
      `    command: ${npx(EVERYTHING, "stdio")}\n${CONNECT}`,
      async (client) => {
        assert.ok((await toolNames(client, "everything__")).includes("everything__echo"));
        const result = await client.callTool({
          name: "everything__echo",
          arguments: { message: "sandboxed" },
        });
        assert.equal(text(result), "Echo: sandboxed");
      },
    );
  },
});

Deno.test({
  ...slow,
  name: "server-memory runs under sandbox: deno writing only its memory file's folder",
  async fn() {
    const data = await Deno.makeTempDir({ prefix: "agent33-memory-" });
    try {
      const entry = `    command: ${npx(MEMORY)}
    env: { MEMORY_FILE_PATH: "${data}/memory.json" }
    permissions: { read: ["${data}"], write: ["${data}"] }
${CONNECT}`;
      await withServer("memory", entry, async (client) => {
        assert.ok((await toolNames(client, "memory__")).includes("memory__read_graph"));
        await client.callTool({
          name: "memory__create_entities",
          arguments: {
            entities: [{ name: "gateway", entityType: "service", observations: ["ok"] }],
          },
        });
        const graph = JSON.parse(
          text(await client.callTool({ name: "memory__read_graph", arguments: {} })),
        );
        assert.deepEqual(graph.entities.map((e: { name: string }) => e.name), ["gateway"]);
      });
      assert.match(await Deno.readTextFile(`${data}/memory.json`), /"gateway"/);
    } finally {
      await Deno.remove(data, { recursive: true });
    }
  },
});

Deno.test({
  ...slow,
  name: "server-filesystem runs under sandbox: deno reading only its allowed directory",
  async fn() {
    const root = await Deno.makeTempDir({ prefix: "agent33-fsroot-" });
    await Deno.writeTextFile(`${root}/hello.txt`, "hello from the sandbox");
    try {
      const entry = `    command: ${npx(FILESYSTEM, root)}
    permissions: { read: ["${root}"] }
${CONNECT}`;
      await withServer("fs", entry, async (client) => {
        assert.ok((await toolNames(client, "fs__")).includes("fs__read_text_file"));
        const result = await client.callTool({
          name: "fs__read_text_file",
          arguments: { path: `${root}/hello.txt` },
        });
        assert.equal(text(result), "hello from the sandbox");
      });
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
});

Deno.test({
  ...slow,
  name: "server-sequential-thinking runs under sandbox: deno with no grants",
  async fn() {
    await withServer(
      "think",
      `    command: ${npx(SEQUENTIAL_THINKING)}\n${CONNECT}`,
      async (client) => {
        assert.deepEqual(await toolNames(client, "think__"), ["think__sequentialthinking"]);
        const result = await client.callTool({
          name: "think__sequentialthinking",
          arguments: {
            thought: "one step",
            thoughtNumber: 1,
            totalThoughts: 1,
            nextThoughtNeeded: false,
          },
        });
        assert.equal(JSON.parse(text(result)).thoughtHistoryLength, 1);
      },
    );
  },
});

Deno.test({
  ...slow,
  name: "time-mcp (third party) runs under sandbox: deno with no grants",
  async fn() {
    await withServer("time", `    command: ${npx(TIME)}\n${CONNECT}`, async (client) => {
      assert.ok((await toolNames(client, "time__")).includes("time__convert_time"));
      const result = await client.callTool({
        name: "time__convert_time",
        arguments: {
          sourceTimezone: "UTC",
          targetTimezone: "Asia/Tokyo",
          time: "2025-03-23 12:30:00",
        },
      });
      assert.match(text(result), /Asia\/Tokyo is 2025-03-23 21:30:00/);
    });
  },
});

Deno.test({
  ...slow,
  name: "git-mcp-server (third party) runs under sandbox: deno confined to its repository and git",
  async fn() {
    const repo = await Deno.makeTempDir({ prefix: "agent33-repo-" });
    const git = (...args: string[]) => new Deno.Command("git", { args, cwd: repo }).output();
    await git("init", "-q");
    await Deno.writeTextFile(`${repo}/untracked.txt`, "new");
    try {
      // Its logger reads the host name and CPU count: declared, like the repository and git.
      const entry = `    command: ${npx(GIT)}
    permissions: { read: ["${repo}"], write: ["${repo}"], run: [git], sys: [hostname, cpus] }
${CONNECT}`;
      await withServer("git", entry, async (client) => {
        assert.ok((await toolNames(client, "git__")).includes("git__git_status"));
        const result = await client.callTool({
          name: "git__git_status",
          arguments: { path: repo },
        });
        assert.deepEqual(JSON.parse(text(result)).untrackedFiles, ["untracked.txt"]);
      });
    } finally {
      await Deno.remove(repo, { recursive: true });
    }
  },
});

Deno.test({
  ...slow,
  name: "context7-mcp (third party) runs under sandbox: deno with net only to its API host",
  async fn() {
    const entry = `    command: ${npx(CONTEXT7)}
    permissions: { net: ["context7.com:443"] }
${CONNECT}`;
    await withServer("c7", entry, async (client) => {
      assert.ok((await toolNames(client, "c7__")).includes("c7__resolve-library-id"));
      const result = await client.callTool({
        name: "c7__resolve-library-id",
        arguments: { libraryName: "react", query: "hooks" },
      });
      // context7.com may be unreachable from here; what matters is the sandbox let the request go.
      assert.doesNotMatch(text(result), /NotCapable|Requires net access/);
      assert.ok(text(result).length > 0);
    });
  },
});
