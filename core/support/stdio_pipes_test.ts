import assert from "node:assert/strict";

const CHILD = new URL("../../tests/fixtures/stdio_pipes_child.ts", import.meta.url).pathname;

function child(mode: string, stdin: "piped" | "null" = "piped") {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", CHILD, mode],
    stdin,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

async function stderrOf(process: Deno.ChildProcess): Promise<string[]> {
  return (await new Response(process.stderr).text()).trim().split("\n");
}

Deno.test("Over pipes, stdin and stdout are socket handles: lines echo in order and EOF ends the output", async () => {
  const process = child("echo");
  const lines = Array.from({ length: 200 }, (_, i) => `{"jsonrpc":"2.0","id":${i}}\n`);
  const writer = process.stdin.getWriter();
  const output = new Response(process.stdout).text();
  const errors = stderrOf(process);
  for (const line of lines) await writer.write(new TextEncoder().encode(line));
  await writer.close();
  assert.equal(await output, lines.join(""));
  assert.equal((await process.status).code, 0);
  assert.deepEqual(JSON.parse((await errors)[0]!), { stdin: true, stdout: true });
});

Deno.test("A stdin that is not a pipe or socket keeps Deno's own stream", async () => {
  const process = child("echo", "null");
  const output = new Response(process.stdout).text();
  const errors = stderrOf(process);
  assert.equal(await output, "");
  assert.equal((await process.status).code, 0);
  assert.deepEqual(JSON.parse((await errors)[0]!), { stdin: false, stdout: true });
});

Deno.test("A reader that goes away fails the writes (EPIPE) instead of crashing the process", async () => {
  const process = child("flood");
  const errors = stderrOf(process);
  const reader = process.stdout.getReader();
  await reader.read(); // the flood has started
  await reader.cancel();
  await process.stdin.close();
  const status = await process.status;
  const lines = await errors;
  assert.equal(status.code, 0, lines.join("\n"));
  assert.match(lines.at(-1)!, /^write failed: /);
});
