import assert from "node:assert/strict";
import { StderrDigest } from "./stderr_digest.ts";

function digest(lines: string[], maxChars = 2000): string[] {
  const out: string[] = [];
  const d = new StderrDigest((line) => out.push(line), maxChars);
  for (const line of lines) d.push(line);
  d.end();
  return out;
}

/** What deno 2.9 prints for an uncaught permission error in an npm package, colours included. */
const DENO_UNCAUGHT = [
  "\x1b[0m\x1b[1m\x1b[31merror\x1b[0m: Uncaught (in promise) NotCapable: Requires env access to " +
  '"__MINIMATCH_TESTING_PLATFORM__", run again with the --allow-env flag',
  "  const platform = process.env.__MINIMATCH_TESTING_PLATFORM__;",
  "\x1b[0m\x1b[31m                  ^\x1b[0m",
  "    \x1b[0m\x1b[2m\x1b[38;5;245mat \x1b[0mObject.getEnv [as get] (ext:deno_os/30_os.js:1:1291)",
  "    at denoEnvGet (ext:deno_node/_process/process.ts:1:1219)",
  "    at file:///cache/npm/registry.npmjs.org/minimatch/10.0.1/dist/esm/index.js:34:18",
  "    at file:///cache/npm/registry.npmjs.org/minimatch/10.0.1/dist/esm/index.js:2:1",
];

Deno.test("An uncaught error is reported as its first line, without colours, with the first frame in the program's code", () => {
  assert.deepEqual(digest(["Secure MCP Filesystem Server starting", ...DENO_UNCAUGHT]), [
    "Secure MCP Filesystem Server starting",
    'error: Uncaught (in promise) NotCapable: Requires env access to "__MINIMATCH_TESTING_PLATFORM__", ' +
    "run again with the --allow-env flag (at file:///cache/npm/registry.npmjs.org/minimatch/10.0.1/dist/esm/" +
    "index.js:34:18; 3 more stack frames)",
  ]);
});

Deno.test("A top-level source excerpt at column 0 and its caret fold into the error too", () => {
  assert.deepEqual(
    digest([
      'error: Uncaught (in promise) NotCapable: Requires read access to "/srv/key.pem"',
      "if (readAtStart) Deno.readTextFileSync(readAtStart);",
      "                      ^",
      "    at Object.readTextFileSync (ext:deno_fs/30_fs.js:1:9859)",
      "    at file:///srv/probe_server.ts:15:23",
    ]),
    [
      'error: Uncaught (in promise) NotCapable: Requires read access to "/srv/key.pem" ' +
      "(at file:///srv/probe_server.ts:15:23; 1 more stack frames)",
    ],
  );
});

Deno.test("A line after an error head that no caret follows is reported as it is", () => {
  assert.deepEqual(
    digest(["error: something failed", "shutting down", "bye"]),
    ["error: something failed", "shutting down", "bye"],
  );
  assert.deepEqual(digest(["error: something failed", "shutting down"]), [
    "error: something failed",
    "shutting down",
  ]);
});

Deno.test("Node-style errors fold their stack too, and the lines after a stack are reported as they are", () => {
  assert.deepEqual(
    digest([
      "TypeError: Cannot read properties of undefined (reading 'x')",
      "    at main (/srv/server.js:10:5)",
      "Node.js v22.0.0",
      "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'y'",
    ]),
    [
      "TypeError: Cannot read properties of undefined (reading 'x') (at main (/srv/server.js:10:5))",
      "Node.js v22.0.0",
      "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'y'",
    ],
  );
});

Deno.test("Ordinary stderr lines pass through, minus escapes, control characters and blank lines", () => {
  assert.deepEqual(
    digest(["\x1b[32mready\x1b[0m on stdio", "", "   ", "  indented but no error before it"]),
    ["ready on stdio", "  indented but no error before it"],
  );
});

Deno.test("Reported lines stay within the line bound", () => {
  const [line] = digest(["error: " + "x".repeat(100), "    at f (a.js:1:1)"], 40);
  assert.equal(line!.length, 40);
  assert.ok(line!.startsWith("error: xxx") && line!.endsWith("…"));
});
