import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { EXIT_BROKEN_PIPE } from "./command.ts";

const MAIN = fileURLToPath(new URL("../main.ts", import.meta.url));
const POLICIES = fileURLToPath(new URL("../policies", import.meta.url));

Deno.test("a command whose reader closed stdout (| head) stops with 141, not a stack trace", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, "policy", "test", "--path", POLICIES],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // Closed before the command starts (that takes Deno a while): its first line finds no reader.
  await child.stdout.cancel();
  const [status, stderr] = await Promise.all([child.status, new Response(child.stderr).text()]);
  assert.equal(stderr, "");
  assert.equal(status.code, EXIT_BROKEN_PIPE);
});
