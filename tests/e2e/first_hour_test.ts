/**
 * The first hour, verbatim: a fresh clone of this repository and nothing but its own tasks run the
 * README's commands. `deno task start` answers an SDK client with the demo fleet's tools, the
 * memory server writes and reads back, and the README's approval example completes;
 * `deno task mcp` lists the whole demo in its first tools/list over stdio; and the MCP Inspector
 * CLI (when npx is here) works against both transports as the README shows. `deno task X` runs
 * with this test's Deno, which is what `npx -y deno@2.9.6 task X` fetches.
 */
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type CallToolResult, McpError } from "@modelcontextprotocol/sdk/types.js";
import { StreamTransport } from "../../core/mcp/stream_transport.ts";
import { hasNpx, INSPECTOR } from "../support/inspector.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SANITIZED = { sanitizeOps: true, sanitizeResources: true };
/** Tools the demo serves at least: natives plus server-everything's and server-memory's. */
const DEMO_TOOLS = 20;

/** A clone of this repository's HEAD in a temporary directory, as a newcomer gets it. */
async function cloneRepository(): Promise<{ dir: string; remove(): Promise<void> }> {
  const parent = await Deno.makeTempDir({ prefix: "agent33-first-hour-" });
  const dir = join(parent, "agent33");
  const git = await new Deno.Command("git", {
    args: ["clone", "--quiet", "--no-hardlinks", ROOT, dir],
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.equal(git.code, 0, new TextDecoder().decode(git.stderr));
  return { dir, remove: () => Deno.remove(parent, { recursive: true }) };
}

/** `deno task <args>` in `cwd`, as the README runs it. */
function task(cwd: string, args: string[], stdin: "piped" | "null" = "null") {
  return new Deno.Command(Deno.execPath(), {
    args: ["task", ...args],
    cwd,
    env: { NO_COLOR: "1", MCP_SERVER_PORT: "0" },
    stdin,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

/** Runs the Inspector CLI with `args` and returns the tool names its tools/list printed. */
async function inspectorToolNames(args: string[], cwd: string): Promise<string[]> {
  const run = await new Deno.Command("npx", {
    args: ["-y", INSPECTOR, "--cli", ...args, "--method", "tools/list"],
    cwd,
    env: {
      NO_COLOR: "1",
      // `deno task` inside the Inspector's stdio target resolves to this test's Deno.
      PATH: `${dirname(Deno.execPath())}:${Deno.env.get("PATH") ?? ""}`,
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(run.stdout);
  assert.equal(run.code, 0, `inspector: ${new TextDecoder().decode(run.stderr).slice(-2000)}`);
  return (JSON.parse(out) as { tools: { name: string }[] }).tools.map((t) => t.name);
}

/**
 * The lines README.md says `task start` prints, as patterns: the port and the checkout's path are
 * the run's own, and a value the README elides (`3q2-…`) stands for any token.
 */
function readmeBanner(clone: string, origin: string): RegExp[] {
  const readme = Deno.readTextFileSync(join(clone, "README.md"));
  const intro = readme.indexOf("task start` listens on `http://127.0.0.1:8787` and prints:");
  assert.ok(intro >= 0, "README shows what task start prints");
  const start = readme.indexOf("```\n", intro) + 4;
  const block = readme.slice(start, readme.indexOf("```\n", start));
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return block.split("\n").filter((line) => line.trim() !== "").map((line) =>
    new RegExp(
      "^" + line.split(/\S*…\S*/).map((part) =>
        escape(
          part.replaceAll("http://127.0.0.1:8787", origin).replaceAll("/path/to/agent33", clone),
        )
      ).join("\\S+") + "$",
    )
  );
}

/** How long the banner may take to be complete once the listening line is out. */
const BANNER_MS = 30_000;

/** The next chunk, or undefined when the stream ends or nothing comes within `ms`. */
async function readWithin(
  reader: ReadableStreamDefaultReader<string>,
  ms: number,
): Promise<string | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((
    resolve,
  ) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    const next = await Promise.race([reader.read(), late]);
    return next === undefined || next.done ? undefined : next.value;
  } finally {
    clearTimeout(timer);
  }
}

/** How many of `patterns` match lines of `text` in order. */
function matchedInOrder(patterns: RegExp[], text: string): number {
  let matched = 0;
  for (const line of text.split("\n")) {
    if (matched < patterns.length && patterns[matched]!.test(line)) matched++;
  }
  return matched;
}

/** The text a call returned. */
function text(result: unknown): string {
  return ((result as CallToolResult).content as { text?: string }[]).map((c) => c.text ?? "")
    .join("");
}

Deno.test("The README's first hour works verbatim from a fresh clone", SANITIZED, async (t) => {
  const clone = await cloneRepository();
  try {
    await t.step(
      "deno task start: the demo fleet for an SDK client, memory writes, the approval example",
      async (s) => {
        const gateway = task(clone.dir, ["start"]);
        const stdout = gateway.stdout.pipeTo(new WritableStream());
        const reader = gateway.stderr.pipeThrough(new TextDecoderStream()).getReader();
        let banner = "";
        try {
          while (!/listening on http:\/\/\S+\n/.test(banner)) {
            const { value, done } = await reader.read();
            assert.ok(!done, `task start ended early:\n${banner}`);
            banner += value;
          }
          const url = /listening on (http:\/\/\S+)/.exec(banner)![1]!;
          // Everything README.md says it prints, line for line, in order.
          const expected = readmeBanner(clone.dir, url);
          while (matchedInOrder(expected, banner) < expected.length) {
            const next = expected[matchedInOrder(expected, banner)];
            const chunk = await readWithin(reader, BANNER_MS);
            assert.ok(
              chunk !== undefined,
              `task start never printed a line like ${next}; it printed:\n${banner}`,
            );
            banner += chunk;
          }
          const [clientToken, operatorToken] = [...banner.matchAll(/Authorization: Bearer (\S+)/g)]
            .map((m) => m[1]!);
          assert.ok(clientToken && operatorToken && clientToken !== operatorToken, banner);

          const client = new Client({ name: "first-hour", version: "1.0.0" });
          await client.connect(
            new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
              requestInit: { headers: { Authorization: `Bearer ${clientToken}` } },
            }),
          );
          try {
            const { tools } = await client.listTools();
            const names = tools.map((tool) => tool.name);
            assert.ok(names.length >= DEMO_TOOLS, names.join(", "));
            for (const name of ["everything__echo", "memory__create_entities", "workflow_run"]) {
              assert.ok(names.includes(name), `${name} in ${names.join(", ")}`);
            }
            const status = await client.callTool({ name: "system_status", arguments: {} });
            const counts = status.structuredContent as { tools: number };
            assert.ok(counts.tools >= names.length, "system_status counts every tool served");

            await client.callTool({
              name: "memory__create_entities",
              arguments: {
                entities: [{ name: "first-hour", entityType: "note", observations: ["written"] }],
              },
            });
            const graph = await client.callTool({ name: "memory__read_graph", arguments: {} });
            assert.match(text(graph), /first-hour/);
            const stored = await Deno.readTextFile(join(clone.dir, ".agent33", "memory.json"));
            assert.match(stored, /first-hour/, "the graph is in the data directory");

            // README "Approve a call": refused, approved with the operator token, retried once.
            const call = {
              name: "memory__delete_entities",
              arguments: { entityNames: ["first-hour"] },
            };
            const refused = await client.callTool(call).then(
              () => assert.fail("a destructive call needs an approval"),
              (error: McpError) => error,
            );
            const data = refused.data as { code: string; request: { id: string } };
            assert.equal(data.code, "approval_required", refused.message);
            const byClient = await fetch(`${url}/v1/approvals/${data.request.id}/approve`, {
              method: "POST",
              headers: { Authorization: `Bearer ${clientToken}` },
            });
            await byClient.body?.cancel();
            assert.equal(byClient.status, 403, "the client token cannot approve");
            const approved = await fetch(`${url}/v1/approvals/${data.request.id}/approve`, {
              method: "POST",
              headers: { Authorization: `Bearer ${operatorToken}` },
            });
            const { token } = await approved.json() as { token: string };
            assert.equal(approved.status, 200);
            await client.callTool({ ...call, _meta: { "agent33/approval_token": token } });
            const after = await client.callTool({ name: "memory__read_graph", arguments: {} });
            assert.doesNotMatch(text(after), /first-hour/);

            await s.step({
              name: "the Inspector CLI lists the demo's tools over HTTP",
              ignore: !hasNpx(),
              fn: async () => {
                const listed = await inspectorToolNames([
                  `${url}/mcp`,
                  "--transport",
                  "http",
                  "--header",
                  `Authorization: Bearer ${clientToken}`,
                ], clone.dir);
                assert.ok(listed.length >= DEMO_TOOLS, listed.join(", "));
              },
            });
          } finally {
            await client.close();
          }
        } finally {
          gateway.kill("SIGTERM");
          const status = await gateway.status;
          for (;;) if ((await reader.read()).done) break;
          await stdout;
          assert.equal(status.code, 0, "task start stops cleanly on SIGTERM");
        }
      },
    );

    await t.step(
      "deno task mcp: the whole demo in the first tools/list over stdio, and its workflow",
      async (s) => {
        const gateway = task(clone.dir, ["mcp"], "piped");
        const stderr = gateway.stderr.pipeTo(new WritableStream());
        const client = new Client({ name: "first-hour-stdio", version: "1.0.0" });
        try {
          await client.connect(
            new StreamTransport(gateway.stdout, gateway.stdin, {
              maxMessageBytes: 1 << 24,
              answerMalformed: false,
            }),
          );
          const { tools } = await client.listTools();
          assert.ok(tools.length >= DEMO_TOOLS, tools.map((tool) => tool.name).join(", "));
          const run = await client.callTool({
            name: "workflow_run",
            arguments: { workflow: "remember", inputs: { entity: "stdio", fact: "it works" } },
          });
          const result = run.structuredContent as { status: string; output: string };
          assert.equal(result.status, "completed", JSON.stringify(result));
          assert.match(result.output, /it works/);
        } finally {
          await client.close();
          await gateway.status;
          await stderr;
        }
        await s.step({
          name: "the Inspector CLI lists the demo's tools over stdio",
          ignore: !hasNpx(),
          fn: async () => {
            const listed = await inspectorToolNames(
              ["deno", "task", "--cwd", clone.dir, "mcp"],
              clone.dir,
            );
            assert.ok(listed.length >= DEMO_TOOLS, listed.join(", "));
          },
        });
      },
    );
  } finally {
    await clone.remove();
  }
});
