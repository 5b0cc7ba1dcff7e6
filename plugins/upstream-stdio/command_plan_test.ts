import assert from "node:assert/strict";
import type { UpstreamServerSpec } from "../../core/plugin_api/mod.ts";
import { DENY_IMPORT_FLAG, permissionFlags, planStdio } from "./command_plan.ts";

const EXEC = "/opt/deno/bin/deno";
const BASE = { PATH: "/usr/bin:/bin", HOME: "/home/gw" };
/** Deno's npm cache under BASE, which every sandboxed child may read. */
const NPM_CACHE = "/home/gw/.cache/deno/npm";

function server(overrides: Partial<UpstreamServerSpec>): UpstreamServerSpec {
  return {
    id: "srv",
    transport: "stdio",
    headers: {},
    env: {},
    permissions: {},
    sandbox: "none",
    ...overrides,
  };
}

const plan = (overrides: Partial<UpstreamServerSpec>) =>
  planStdio(server(overrides), { maxMessageBytes: 4096, baseEnv: BASE }, EXEC);

Deno.test("planStdio gives the child the base env with the server's env laid over it, and nothing else", () => {
  const p = plan({
    command: ["node", "server.js"],
    env: { API_KEY: "k", HOME: "/srv/home" },
    cwd: "/srv",
  });
  assert.deepEqual(p.start, {
    serverId: "srv",
    transport: "stdio",
    command: ["node", "server.js"],
    env: { PATH: "/usr/bin:/bin", HOME: "/srv/home", API_KEY: "k" },
    cwd: "/srv",
    maxMessageBytes: 4096,
  });
});

Deno.test("planStdio lets the relay worker run only the child's command", () => {
  assert.deepEqual(plan({ command: ["node", "server.js"] }).permissions, {
    run: ["node"],
    read: false,
    write: false,
    net: false,
    env: false,
    sys: false,
  });
});

Deno.test("planStdio replaces deno with the running deno's path", () => {
  const p = plan({ command: ["deno", "run", "-A", "server.ts"] });
  assert.deepEqual(p.start.command, [EXEC, "run", "-A", "server.ts"]);
  assert.deepEqual(p.permissions.run, [EXEC]);
});

Deno.test("planStdio runs deno run commands under --no-prompt with flags from the permissions block", () => {
  const p = plan({
    command: ["deno", "run", "--no-config", "server.ts", "--port", "1"],
    sandbox: "deno",
    permissions: {
      read: ["/data", "/etc/app"],
      write: ["/data"],
      net: true,
      env: ["API_KEY"],
      run: ["git"],
      sys: ["hostname"],
    },
  });
  assert.deepEqual(p.start.command, [
    EXEC,
    "run",
    "--no-prompt",
    DENY_IMPORT_FLAG,
    `--allow-read=/data,/etc/app,${NPM_CACHE}`,
    "--allow-write=/data",
    "--allow-net",
    "--allow-env=API_KEY",
    "--allow-run=git",
    "--allow-sys=hostname",
    "--no-config",
    "server.ts",
    "--port",
    "1",
  ]);
  assert.deepEqual(p.permissions.run, [EXEC]);
});

Deno.test("planStdio turns npx packages into deno run npm: specifiers under sandbox deno", () => {
  const p = plan({
    command: ["npx", "-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "/data"],
    sandbox: "deno",
    permissions: { read: ["/data"] },
  });
  assert.deepEqual(p.start.command, [
    EXEC,
    "run",
    "--no-prompt",
    "--no-config",
    DENY_IMPORT_FLAG,
    `--allow-read=/data,${NPM_CACHE}`,
    "--allow-env",
    "npm:@modelcontextprotocol/server-filesystem@2026.8.31",
    "/data",
  ]);
  assert.deepEqual(
    plan({ command: ["npx", "pkg"], sandbox: "deno" }).start.command,
    [
      EXEC,
      "run",
      "--no-prompt",
      "--no-config",
      DENY_IMPORT_FLAG,
      `--allow-read=${NPM_CACHE}`,
      "--allow-env",
      "npm:pkg",
    ],
  );
});

Deno.test("planStdio lets a sandboxed child read the npm package cache but never write it", () => {
  const p = plan({
    command: ["deno", "run", "npm:@scope/server@1.2.3", "stdio"],
    sandbox: "deno",
    permissions: { env: ["X"], write: ["/out"] },
  });
  assert.deepEqual(p.start.command, [
    EXEC,
    "run",
    "--no-prompt",
    "--no-config",
    DENY_IMPORT_FLAG,
    `--allow-read=${NPM_CACHE}`,
    "--allow-write=/out",
    "--allow-env=X",
    "npm:@scope/server@1.2.3",
    "stdio",
  ]);
  const everything = plan({
    command: ["deno", "run", "npm:@scope/server@1.2.3"],
    sandbox: "deno",
    permissions: { read: true },
  });
  assert.ok(everything.start.command!.includes("--allow-read"));
  const elsewhere = planStdio(
    server({ command: ["npx", "pkg"], sandbox: "deno" }),
    { maxMessageBytes: 4096, baseEnv: { ...BASE, DENO_DIR: "/var/cache/deno" } },
    EXEC,
  );
  assert.ok(elsewhere.start.command!.includes("--allow-read=/var/cache/deno/npm"));
});

Deno.test("planStdio lets a sandboxed child read its environment unless the block narrows or denies it", () => {
  const flags = (env?: boolean | string[]) =>
    plan({
      command: ["npx", "pkg"],
      sandbox: "deno",
      permissions: env === undefined ? {} : { env },
    }).start.command!.filter((f) => f.startsWith("--allow-env") || f.startsWith("--ignore-env"));
  assert.deepEqual(flags(), ["--allow-env"]);
  assert.deepEqual(flags(["API_KEY"]), ["--allow-env=API_KEY"]);
  assert.deepEqual(flags(false), []);
});

Deno.test("planStdio hides base variables carrying URL credentials from a sandboxed child's code", () => {
  const p = planStdio(
    server({ command: ["npx", "pkg"], sandbox: "deno", env: { HTTP_PROXY: "http://own:pw@p:1" } }),
    {
      maxMessageBytes: 4096,
      baseEnv: {
        ...BASE,
        HTTPS_PROXY: "http://user:secret@proxy.internal:3128",
        HTTP_PROXY: "http://user:secret@proxy.internal:3128",
        NPM_CONFIG_REGISTRY: "https://npm.internal/",
      },
    },
    EXEC,
  );
  // The server's own env is its to read; a registry URL without credentials reveals nothing.
  assert.ok(p.start.command!.includes("--ignore-env=HTTPS_PROXY"));
  assert.equal(p.start.env!.HTTPS_PROXY, "http://user:secret@proxy.internal:3128");
});

Deno.test("planStdio denies every host Deno lets programs import from by default", async () => {
  // The list in `deno run --help` of the running deno: an upgrade that adds a host fails here.
  const help = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--help"],
    env: { NO_COLOR: "1" },
  })
    .output();
  const text = new TextDecoder().decode(help.stdout);
  const defaults = /--allow-import[\s\S]*?Default value: ([^\s]+)/.exec(text)?.[1]?.split(",");
  assert.ok(defaults && defaults.length > 0, "deno run --help lists the default import hosts");
  const denied = DENY_IMPORT_FLAG.slice("--deny-import=".length).split(",");
  for (const host of defaults) assert.ok(denied.includes(host), host);
  const p = plan({ command: ["deno", "run", "s.ts"], sandbox: "deno" });
  assert.ok(p.start.command!.includes(DENY_IMPORT_FLAG));
});

Deno.test("planStdio refuses deno run flags that would undo the sandbox, naming the server", () => {
  for (
    const flag of [
      "--env-file=/etc/gateway/.env",
      "--env-file",
      "--inspect=127.0.0.1:9229",
      "--inspect-brk",
    ]
  ) {
    assert.throws(
      () => plan({ command: ["deno", "run", flag, "server.ts"], sandbox: "deno" }),
      {
        code: "config_invalid",
        message: /^Upstream "srv" passes ".+" to deno run, which would undo sandbox: deno/,
      },
      flag,
    );
  }
});

Deno.test("planStdio runs a sandboxed deno child without the gateway's deno.json unless one is named", () => {
  assert.ok(plan({ command: ["deno", "run", "s.ts"], sandbox: "deno" }).start.command!.includes(
    "--no-config",
  ));
  const named = plan({
    command: ["deno", "run", "--config", "/app/deno.json", "s.ts"],
    sandbox: "deno",
  }).start.command!;
  assert.equal(named.includes("--no-config"), false);
});

Deno.test("planStdio with no permissions grants the sandboxed child only the cache and its environment", () => {
  assert.deepEqual(
    plan({ command: ["deno", "run", "server.ts"], sandbox: "deno" }).start.command,
    [
      EXEC,
      "run",
      "--no-prompt",
      "--no-config",
      DENY_IMPORT_FLAG,
      `--allow-read=${NPM_CACHE}`,
      "--allow-env",
      "server.ts",
    ],
  );
  assert.deepEqual(
    plan({ command: ["deno", "run", "--no-prompt", "s.ts"], sandbox: "deno" }).start.command,
    [
      EXEC,
      "run",
      "--no-config",
      DENY_IMPORT_FLAG,
      `--allow-read=${NPM_CACHE}`,
      "--allow-env",
      "--no-prompt",
      "s.ts",
    ],
  );
});

Deno.test("planStdio refuses permission flags in a sandboxed deno command, naming the server", () => {
  for (
    const flags of [
      ["-A"],
      ["--allow-all"],
      ["--allow-read"],
      ["--allow-net=example.com"],
      ["-N"],
      ["-qA"],
      ["-P"],
      ["--permission-set=default"],
      ["--config", "deno.json", "-A"],
      ["--lock", "-A"],
    ]
  ) {
    assert.throws(
      () => plan({ command: ["deno", "run", ...flags, "server.ts"], sandbox: "deno" }),
      (error: Error & { code?: string }) => {
        assert.equal(error.name, "GatewayError");
        assert.equal(error.code, "config_invalid");
        assert.match(error.message, /^Upstream "srv" passes ".+" to deno run/);
        assert.match(error.message, /permissions come only from its permissions block/);
        return true;
      },
      flags.join(" "),
    );
  }
});

Deno.test("planStdio leaves flags after the module to the program", () => {
  const p = plan({ command: ["deno", "run", "-c", "deno.json", "s.ts", "-A"], sandbox: "deno" });
  assert.deepEqual(p.start.command!.slice(-4), ["-c", "deno.json", "s.ts", "-A"]);
});

Deno.test("planStdio refuses other commands under sandbox deno, naming both accepted forms", () => {
  for (
    const command of [["python", "server.py"], ["deno", "serve", "s.ts"], ["npx", "--package=x"]]
  ) {
    assert.throws(() => plan({ command, sandbox: "deno" }), {
      name: "GatewayError",
      code: "config_invalid",
      message: new RegExp(
        '^Upstream "srv" uses sandbox: deno, so its command must be \\["deno", "run", .*\\] or ' +
          '\\["npx", "-y", "<package>", .*\\]; received ',
      ),
    });
  }
});

Deno.test("planStdio refuses a missing command with config_invalid naming the server", () => {
  assert.throws(() => plan({}), {
    code: "config_invalid",
    message: /^Upstream "srv" has no command/,
  });
  assert.throws(() => plan({ command: [] }), { code: "config_invalid" });
});

Deno.test("permissionFlags refuses values Deno would split on commas", () => {
  assert.throws(() => permissionFlags("srv", { read: ["/a,b"] }), {
    code: "config_invalid",
    message: /Upstream "srv" has permissions.read value "\/a,b"/,
  });
  assert.deepEqual(permissionFlags("srv", { read: [], net: false, env: true }), ["--allow-env"]);
});
