/**
 * The architecture rules, checked on the source tree (ARCHITECTURE.md explains them): no import
 * cycle, plugins reach core only through the facade, files and functions stay small enough to read,
 * time comes from the injected clock and settings from the config, and every core room's README
 * and ARCHITECTURE.md's rooms table say what each room imports.
 * Each exception names its reason; an exception no longer needed fails too, so the lists shrink.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import {
  functionSpans,
  importCycles,
  isPluginFacade,
  readSourceTree,
  roomImports,
  roomOf,
  type SourceFile,
  withoutComments,
} from "./support/import_graph.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
const MAX_FILE_LINES = 500;
const MAX_FUNCTION_LINES = 120;

/** Import cycles still to break, keyed by the sorted file list joined with spaces (none left). */
const CYCLE_EXCEPTIONS: Record<string, string> = {};

/** Plugin files still importing core past the facade, with the core files they import (none left). */
const PLUGIN_LEAK_EXCEPTIONS: Record<string, string> = {};

/** Source files allowed past MAX_FILE_LINES, each with why it has not been split yet. */
const BIG_FILE_EXCEPTIONS: Record<string, string> = {
  "core/governance/policy_loader.ts":
    "one parser for the whole policy document with its precise line-numbered messages",
  "core/governance/tool_governance.ts":
    "the verdict for every rule of the policy in one place (the precedence truth table)",
  "core/governance/approval_queue.ts":
    "the queue, its persistence, its expiry and its sharing with replicas (the one place of the approval rules)",
  "core/proxy/child_server_handle.ts":
    "one upstream's lifecycle: worker, restarts, breaker, catalog and calls",
  "core/proxy/fleet_config.ts": "the fleet YAML parser with its line-numbered messages",
  "core/proxy/worker_transport.ts": "the kernel side of the worker protocol, bounds included",
};

/** Functions allowed past MAX_FUNCTION_LINES (`file#name`), each with why. */
const BIG_FUNCTION_EXCEPTIONS: Record<string, string> = {
  "core/config/config.ts#resolveConfig":
    "maps every parsed variable (defaults from core/config/settings/) onto the nested config in one literal",
  "core/governance/tool_governance.ts##verdict":
    "the policy's precedence as one readable sequence of checks",
  "core/operator/metrics_gateway.ts#constructor": "declares every metric family of the gateway",
  "core/operator/openapi.ts#openApiDocument": "the OpenAPI document is one literal",
  "core/proxy/fleet_config.ts#parseFleetConfig":
    "walks the fleet YAML field by field to report each problem with its line",
  "core/scanner/pin.ts#diffPin": "compares every field of a pinned catalog",
  "cli/scan_cli.ts#runScanCommand": "the scan command's flags and output in one place",
  "cli/discover_cli.ts#runDiscoverCommand": "the discover command's flags and output in one place",
  "plugins/transport-streamable-http/mod.ts#create":
    "the Streamable HTTP endpoints share the session map and bounds",
  "plugins/upstream-stdio/relay.ts#createStdioRelay":
    "the child's stdin, stdout and stderr pumps share one lifecycle",
};

/** Source files allowed to use the runtime's timers directly, each with why. */
const TIMER_EXCEPTIONS: Record<string, string> = {
  "core/support/clock.ts": "systemClock is the one real clock the others are injected with",
  "core/operator/dashboard/app.js":
    "the dashboard's browser code: it runs in the operator's browser",
};

/** Source files allowed to read Deno.env outside core/config/, each with why (none left). */
const ENV_EXCEPTIONS: Record<string, string> = {};

const files: SourceFile[] = await readSourceTree(ROOT);
const code = new Map(
  await Promise.all(
    files.map(async (f) =>
      [f.path, withoutComments(await Deno.readTextFile(`${ROOT}/${f.path}`))] as const
    ),
  ),
);

/** The files whose code (comments dropped) matches `pattern`, with the matches found. */
function filesMatching(pattern: RegExp, skip: (path: string) => boolean = () => false) {
  const found: Record<string, string> = {};
  for (const [path, text] of code) {
    if (skip(path)) continue;
    const hits = [...new Set([...text.matchAll(pattern)].map((m) => m[0].replace(/\s*\($/, "")))];
    if (hits.length > 0) found[path] = hits.join(" ");
  }
  return found;
}

/** Fails listing the actual findings against the allowed ones, both ways. */
function assertOnlyExceptions(
  found: Record<string, string>,
  allowed: Record<string, string>,
  what: string,
): void {
  const unexpected = Object.keys(found).filter((k) => !(k in allowed));
  const stale = Object.keys(allowed).filter((k) => !(k in found));
  assert.deepEqual(
    { unexpected: unexpected.map((k) => `${k} (${found[k]})`), stale },
    { unexpected: [], stale: [] },
    `${what}: fix the unexpected ones (or, with a reason, add them to the exceptions); ` +
      `remove the stale exceptions`,
  );
}

Deno.test("the source tree is found (the checks below measure something)", () => {
  assert.ok(files.some((f) => f.path === "main.ts"));
  assert.ok(files.filter((f) => f.path.startsWith("plugins/")).length > 10);
  assert.ok(files.find((f) => f.path === "core/kernel.ts")!.imports.length > 10);
});

Deno.test("the checker finds a cycle through type-only imports and measures a method", () => {
  const file = (path: string, imports: string[]): SourceFile => ({
    path,
    imports,
    lines: 1,
    functions: [],
  });
  assert.deepEqual(
    importCycles([file("a.ts", ["b.ts"]), file("b.ts", ["a.ts"]), file("c.ts", ["a.ts"])]),
    [["a.ts", "b.ts"]],
  );
  const source = [
    'import type { X } from "./x.ts";',
    "class C {",
    "  async #run(",
    "    x: number,",
    "  ): Promise<void> {",
    "    if (x) {",
    "    }",
    "  }",
    "}",
  ].join("\n");
  assert.deepEqual(functionSpans(source), [{ name: "#run", line: 3, lines: 6 }]);
});

Deno.test("no import cycle among source files (type-only imports count)", () => {
  const found = Object.fromEntries(
    importCycles(files).map((cycle) => [cycle.join(" "), `${cycle.length} files`]),
  );
  assertOnlyExceptions(found, CYCLE_EXCEPTIONS, "import cycles");
});

Deno.test("a plugin imports core only through the facade (core/plugin_api/mod.ts, core/plugin_api/)", () => {
  const found: Record<string, string> = {};
  for (const file of files.filter((f) => f.path.startsWith("plugins/"))) {
    const leaks = file.imports.filter((i) => i.startsWith("core/") && !isPluginFacade(i));
    if (leaks.length > 0) found[file.path] = leaks.join(" ");
  }
  assertOnlyExceptions(found, PLUGIN_LEAK_EXCEPTIONS, "plugin imports past the facade");
  for (const [path, leaks] of Object.entries(found)) {
    assert.equal(leaks, PLUGIN_LEAK_EXCEPTIONS[path], `${path} imports more of core than allowed`);
  }
});

Deno.test(`no source file over ${MAX_FILE_LINES} lines`, () => {
  const found = Object.fromEntries(
    files.filter((f) => !f.path.endsWith(".js") && f.lines > MAX_FILE_LINES).map((f) => [
      f.path,
      `${f.lines} lines`,
    ]),
  );
  assertOnlyExceptions(found, BIG_FILE_EXCEPTIONS, `files over ${MAX_FILE_LINES} lines`);
});

Deno.test(`no function over ${MAX_FUNCTION_LINES} lines`, () => {
  const found: Record<string, string> = {};
  for (const file of files) {
    for (const fn of file.functions.filter((f) => f.lines > MAX_FUNCTION_LINES)) {
      found[`${file.path}#${fn.name}`] = `line ${fn.line}, ${fn.lines} lines`;
    }
  }
  assertOnlyExceptions(
    found,
    BIG_FUNCTION_EXCEPTIONS,
    `functions over ${MAX_FUNCTION_LINES} lines`,
  );
});

Deno.test("time comes from the injected clock: no setTimeout, setInterval or AbortSignal.timeout outside it", () => {
  const found = filesMatching(
    /(?<![\w$.])(?:globalThis\.)?(?:setTimeout|setInterval)\s*\(|AbortSignal\.timeout\s*\(/g,
  );
  assertOnlyExceptions(
    found,
    TIMER_EXCEPTIONS,
    "runtime timers past the clock (use deadline, settlesWithin, pause or every from core/support/clock.ts)",
  );
});

Deno.test("settings come from the config: no Deno.env read outside core/config/", () => {
  const found = filesMatching(/Deno\.env\b/g, (path) => path.startsWith("core/config/"));
  assertOnlyExceptions(
    found,
    ENV_EXCEPTIONS,
    "Deno.env reads outside core/config/ (pass the resolved environment or config)",
  );
});

Deno.test("the timer rule sees a bare timer but not a clock's", () => {
  const timer =
    /(?<![\w$.])(?:globalThis\.)?(?:setTimeout|setInterval)\s*\(|AbortSignal\.timeout\s*\(/;
  assert.ok(timer.test("const id = setTimeout(fn, 5);"));
  assert.ok(timer.test("signal: AbortSignal.timeout(10),"));
  assert.ok(timer.test("globalThis.setInterval(tick, 5)"));
  assert.ok(!timer.test("clock.setTimeout(fn, 5)"));
  assert.ok(!timer.test("this.#options.clock.setTimeout(fn, 5)"));
});

/** Directories inside a room that are rooms of their own (other subdirectories belong to theirs). */
const NESTED_ROOMS = ["core/config/settings"];
const roomEdges = roomImports(files, NESTED_ROOMS);
/** The rooms under core/: every directory holding source, and the nested rooms. */
const coreRooms = [...roomEdges.keys()].filter((r) => r.startsWith("core/") && !r.endsWith(".ts"))
  .sort();

/** How the docs name a room: without `core/` (`auth`, `config/settings`, `kernel.ts`, `cli`). */
function docName(room: string): string {
  return room.replace(/^core\//, "");
}

/** The rooms a room imports today, as the docs name them. */
function importsOf(room: string): string[] {
  return [...roomEdges.get(room)!].map(docName).sort();
}

/** The room names in backticks in a piece of Markdown, outside parentheses (which say why). */
function namedRooms(markdown: string): string[] {
  return [...markdown.replace(/\([^)]*\)/g, "").matchAll(/`([^`]+)`/g)].map((m) =>
    m[1]!.replace(/\/$/, "")
  ).sort();
}

Deno.test("the room checks see every core room (the checks below measure something)", () => {
  for (const room of ["core/mcp", "core/proxy", "core/config", "core/config/settings"]) {
    assert.ok(coreRooms.includes(room), room);
  }
  assert.ok(importsOf("core/mcp").includes("support"));
  const nested = ["core/config/settings"];
  assert.deepEqual(
    [
      "core/sdk/server/index.ts",
      "core/config/settings/setting.ts",
      "core/config/config.ts",
      "core/kernel.ts",
      "plugins/bus-nats/mod.ts",
      "main.ts",
    ].map((path) => roomOf(path, nested)),
    ["core/sdk", "core/config/settings", "core/config", "core/kernel.ts", "plugins", "main.ts"],
  );
  assert.deepEqual(namedRooms("`proxy`, `plugins/` (runs the `rules`), `support`"), [
    "plugins",
    "proxy",
    "support",
  ]);
});

Deno.test("every core room has a README.md whose 'May import:' line allows what the room imports", async () => {
  const known = new Set([...roomEdges.keys()].map(docName));
  const problems: string[] = [];
  for (const room of coreRooms) {
    let text: string;
    try {
      text = await Deno.readTextFile(`${ROOT}/${room}/README.md`);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      problems.push(`${room}/README.md is missing: say what the room owns and what it may import`);
      continue;
    }
    const line = /^May import:(.*(?:\n(?!\n).*)*)/m.exec(text)?.[1];
    if (line === undefined) {
      problems.push(`${room}/README.md has no "May import:" paragraph`);
      continue;
    }
    const allowed = namedRooms(line);
    const unknown = allowed.filter((name) => !known.has(name));
    const forbidden = importsOf(room).filter((name) => !allowed.includes(name));
    if (unknown.length > 0) problems.push(`${room}/README.md allows unknown rooms: ${unknown}`);
    if (forbidden.length > 0) {
      problems.push(`${room} imports ${forbidden} but its README.md does not allow it`);
    }
  }
  assert.deepEqual(problems, []);
});

Deno.test("ARCHITECTURE.md's rooms table names every core room with what it imports today", async () => {
  const rows = new Map<string, string>();
  for (const line of (await Deno.readTextFile(`${ROOT}/ARCHITECTURE.md`)).split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    const room = /^`(core\/[^`]+)\/`$/.exec(cells[1] ?? "")?.[1];
    if (room !== undefined) rows.set(room, cells[3] ?? "");
  }
  assert.deepEqual(
    [...rows.keys()].sort(),
    coreRooms,
    "one row per core room, no row for a gone one",
  );
  for (const room of coreRooms) {
    assert.deepEqual(
      namedRooms(rows.get(room)!),
      importsOf(room),
      `the "Imports today" cell of ${room}/ in ARCHITECTURE.md`,
    );
  }
});

/** The names the original spec gives the main parts: each stays a class, named by ARCHITECTURE.md and its room's README. */
const SEED_NAMES = [
  "MCPServiceBridge",
  "ProxyManager",
  "ChildServerHandle",
  "CircuitBreaker",
  "ToolGovernance",
  "ToolActivationManager",
];

Deno.test("the seed's names stay greppable: each a class, in ARCHITECTURE.md and its room's README", async () => {
  const architecture = await Deno.readTextFile(`${ROOT}/ARCHITECTURE.md`);
  for (const name of SEED_NAMES) {
    const declaring = [...code].filter(([, text]) => text.includes(`export class ${name} `));
    assert.equal(declaring.length, 1, `one file declares class ${name}`);
    const room = roomOf(declaring[0]![0], NESTED_ROOMS);
    assert.ok(architecture.includes(name), `ARCHITECTURE.md names ${name}`);
    const readme = await Deno.readTextFile(`${ROOT}/${room}/README.md`);
    assert.ok(readme.includes(name), `${room}/README.md names ${name}`);
  }
});
