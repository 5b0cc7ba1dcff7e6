import assert from "node:assert/strict";
import { type ConfigFlags, resolveConfig } from "./config/config.ts";
import { GatewayError } from "./support/errors.ts";
import type { GatewayEvent } from "./bus/events.ts";
import { Kernel, type KernelOptions } from "./kernel.ts";
import { createLogger, silentLogger } from "./support/logger.ts";
import { PLUGIN_KINDS } from "./plugin_api/mod.ts";
import { BUILTIN_PLUGIN_DIR } from "./plugin_host/plugin_loader.ts";

/** Absolute URL of the plugin API, for fixture sources written outside the project. */
const API = new URL("./plugin_api/mod.ts", import.meta.url).href;

/** Streams that never touch the process's stdio. */
function testStdio(): NonNullable<KernelOptions["stdio"]> {
  return { stdin: new ReadableStream(), stdout: new WritableStream() };
}

/** Source of a fixture `mod.ts`: `body` is the rest of the manifest object (at least `create`). */
function plugin(name: string, kind: string, body: string): string {
  return `import { definePlugin } from ${JSON.stringify(API)};
export default definePlugin({
  name: ${JSON.stringify(name)},
  version: "1.0.0",
  kind: ${JSON.stringify(kind)},
  permissions: {},
  ${body}
} as never);
`;
}

/** Writes `<dir>/<folder>/mod.ts` for each entry under a fresh temp dir, runs `fn`, removes it. */
async function withPlugins(
  sources: Record<string, string>,
  fn: (dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "kernel_test_" });
  try {
    for (const [folder, source] of Object.entries(sources)) {
      await Deno.mkdir(`${dir}/${folder}`);
      await Deno.writeTextFile(`${dir}/${folder}/mod.ts`, source);
    }
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A kernel on a free loopback port with token "t", unless `env` says otherwise. */
function kernel(
  options: Omit<KernelOptions, "config"> & {
    env?: Record<string, string>;
    flags?: ConfigFlags;
  },
): Kernel {
  const { env = {}, flags = {}, ...rest } = options;
  return new Kernel({
    logger: silentLogger,
    stdio: testStdio(),
    ...rest,
    config: resolveConfig({ MCP_SERVER_PORT: "0", MCP_SERVER_AUTH_TOKEN: "t", ...env }, flags),
  });
}

/** Runs `fn` with the kernel, and always stops it. */
async function using(k: Kernel, fn: (k: Kernel) => Promise<void>): Promise<void> {
  try {
    await fn(k);
  } finally {
    await k.stop();
  }
}

/** Records every event the kernel's bus publishes. */
function record(k: Kernel): GatewayEvent[] {
  const events: GatewayEvent[] = [];
  k.bus.subscribe((event) => void events.push(event));
  return events;
}

/** A memory-sink logger and its lines. */
function memoryLogger() {
  const lines: string[] = [];
  return { lines, logger: createLogger({ level: "debug", sink: (line) => lines.push(line) }) };
}

const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "kernel-test", version: "1.0.0" },
  },
});

function initialize(url: string, token?: string): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body: INITIALIZE,
  });
}

Deno.test("Kernel reports a throwing factory with its path, publishes plugin.failed, and still starts", async () => {
  await withPlugins({
    thrower: plugin("thrower", "model", 'create() { throw new Error("no model for you"); },'),
    fine: plugin("fine", "model", "create() { return { fine: true }; },"),
  }, async (dir) => {
    const k = kernel({ pluginDirs: [dir] });
    const events = record(k);
    await using(k, async () => {
      const info = await k.start();
      const path = `${dir}/thrower/mod.ts`;
      assert.equal(info.pluginFailures.length, 1);
      assert.deepEqual(k.pluginFailures, info.pluginFailures);
      const [failure] = k.pluginFailures;
      assert.equal(failure!.path, path);
      assert.match(failure!.reason, /^factory threw: no model for you/);
      assert.deepEqual(events.filter((e) => e.type === "plugin.failed"), [
        { type: "plugin.failed", path, reason: failure!.reason },
      ]);
      assert.deepEqual(k.pluginsOf("model"), [{ fine: true }]);

      assert.ok(info.url);
      const response = await fetch(`${info.url}/healthz`);
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), { status: "ok" });
    });
  });
});

Deno.test("Kernel reports load failures as plugin.failed events and pluginFailures", async () => {
  await withPlugins({ broken: "export default {{{" }, async (dir) => {
    const missing = `${dir}/nope`;
    const k = kernel({ pluginDirs: [dir, missing] });
    const events = record(k);
    await using(k, async () => {
      const info = await k.start();
      assert.deepEqual(info.pluginFailures.map((f) => f.path), [`${dir}/broken/mod.ts`, missing]);
      assert.deepEqual(
        events.flatMap((e) => e.type === "plugin.failed" ? [e.path] : []),
        [`${dir}/broken/mod.ts`, missing],
      );
    });
  });
});

Deno.test("Kernel instantiates a plugin from an MCP_PLUGIN_PATHS directory and registers its tool", async () => {
  await withPlugins({
    "echo-model": plugin(
      "echo-model",
      "model",
      `create(ctx) {
        ctx.tools.register({
          name: "fixture_echo",
          description: "Echoes its text",
          inputSchema: { type: "object", properties: { text: { type: "string" } } },
          handler: async (args) => ({ content: [{ type: "text", text: String(args.text) }] }),
        });
        return { model: "echo" };
      },`,
    ),
  }, async (dir) => {
    const config = resolveConfig({ MCP_PLUGIN_PATHS: dir }, {});
    const k = kernel({
      env: { MCP_PLUGIN_PATHS: dir },
      pluginDirs: [BUILTIN_PLUGIN_DIR, ...config.pluginPaths],
    });
    const events = record(k);
    await using(k, async () => {
      const info = await k.start();
      // Only this fixture is asserted on: built-in plugins may come and go.
      assert.deepEqual(info.pluginFailures.filter((f) => f.path.startsWith(dir)), []);
      assert.ok(k.tools.list().some((t) => t.name === "fixture_echo"));
      assert.equal(k.tools.get("fixture_echo")?.description, "Echoes its text");
      assert.ok(k.pluginsOf("model").some((m) => (m as { model?: string }).model === "echo"));
      assert.equal(k.pluginsOf("upstream").length, 3);
      assert.ok(k.pluginsOf("transport").length >= 3);
      assert.deepEqual(
        events.find((e) => e.type === "plugin.loaded" && e.plugin === "echo-model"),
        {
          type: "plugin.loaded",
          plugin: "echo-model",
          kind: "model",
          path: `${dir}/echo-model/mod.ts`,
        },
      );
    });
  });
});

Deno.test("Kernel passes MCP_PLUGIN_<NAME>_<KEY> variables to the plugin as ctx.config", async () => {
  await withPlugins({
    "my-model": plugin("my-model", "model", "create(ctx) { return { config: ctx.config }; },"),
  }, async (dir) => {
    const k = kernel({
      env: {
        MCP_PLUGIN_MY_MODEL_ENDPOINT: "http://127.0.0.1:1",
        MCP_PLUGIN_MY_MODEL_MAX_TOKENS: "64",
        MCP_PLUGIN_OTHER_ENDPOINT: "not mine",
      },
      pluginDirs: [dir],
    });
    await using(k, async () => {
      await k.start();
      assert.deepEqual(k.pluginsOf("model"), [{
        config: { endpoint: "http://127.0.0.1:1", max_tokens: "64" },
      }]);
    });
  });
});

Deno.test("Kernel gives the plugin the data its configSchema returns", async () => {
  await withPlugins({
    "typed": plugin(
      "typed",
      "model",
      `configSchema: {
        safeParse(input) {
          return { success: true, data: { retries: Number(input.retries ?? "1") } };
        },
      },
      create(ctx) { return { config: ctx.config }; },`,
    ),
  }, async (dir) => {
    const k = kernel({ env: { MCP_PLUGIN_TYPED_RETRIES: "3" }, pluginDirs: [dir] });
    await using(k, async () => {
      const info = await k.start();
      assert.deepEqual(info.pluginFailures, []);
      assert.deepEqual(k.pluginsOf("model"), [{ config: { retries: 3 } }]);
    });
  });
});

Deno.test("Kernel skips a plugin whose configSchema rejects its slice and names MCP_PLUGIN_<NAME>_*", async () => {
  await withPlugins({
    "strict-model": plugin(
      "strict-model",
      "model",
      `configSchema: {
        safeParse(input) {
          return input.url
            ? { success: true, data: input }
            : { success: false, error: new Error("url is required") };
        },
      },
      create() { return { created: true }; },`,
    ),
  }, async (dir) => {
    const k = kernel({ env: { MCP_PLUGIN_STRICT_MODEL_URL: "" }, pluginDirs: [dir] });
    const events = record(k);
    await using(k, async () => {
      const info = await k.start();
      assert.equal(info.pluginFailures.length, 1);
      const [failure] = info.pluginFailures;
      assert.equal(failure!.path, `${dir}/strict-model/mod.ts`);
      assert.ok(failure!.reason.includes("MCP_PLUGIN_STRICT_MODEL_*"), failure!.reason);
      assert.ok(failure!.reason.includes("url is required"), failure!.reason);
      assert.deepEqual(k.pluginsOf("model"), []);
      assert.ok(events.some((e) => e.type === "plugin.failed" && e.path === failure!.path));
      assert.ok(!events.some((e) => e.type === "plugin.loaded"));
    });
  });
});

Deno.test("Kernel skips a plugin whose configSchema throws, and starts the others", async () => {
  await withPlugins({
    "a-throwing-schema": plugin(
      "a-throwing-schema",
      "model",
      `configSchema: { safeParse() { throw new Error("schema exploded"); } },
      create() { return { created: "a" }; },`,
    ),
    "b-fine": plugin("b-fine", "model", 'create() { return { created: "b" }; },'),
  }, async (dir) => {
    const k = kernel({ pluginDirs: [dir] });
    await using(k, async () => {
      const info = await k.start();
      assert.equal(info.pluginFailures.length, 1);
      const [failure] = info.pluginFailures;
      assert.equal(failure!.path, `${dir}/a-throwing-schema/mod.ts`);
      assert.ok(failure!.reason.includes("MCP_PLUGIN_A_THROWING_SCHEMA_*"), failure!.reason);
      assert.ok(failure!.reason.includes("schema exploded"), failure!.reason);
      assert.deepEqual(k.pluginsOf("model"), [{ created: "b" }]);
    });
  });
});

Deno.test("Kernel keeps the raw config slice when configSchema succeeds without data", async () => {
  await withPlugins({
    "no-data": plugin(
      "no-data",
      "model",
      `configSchema: { safeParse() { return { success: true }; } },
      create(ctx) { return { config: ctx.config }; },`,
    ),
  }, async (dir) => {
    const k = kernel({ env: { MCP_PLUGIN_NO_DATA_KEY: "v" }, pluginDirs: [dir] });
    await using(k, async () => {
      await k.start();
      assert.deepEqual(k.pluginsOf("model"), [{ config: { key: "v" } }]);
    });
  });
});

Deno.test("Kernel stop closes plugins, logs a close that throws, and still closes the next", async () => {
  await withPlugins({
    "a-bad-close": plugin(
      "a-bad-close",
      "model",
      `create() {
        return { close() { globalThis.__kernelTestClosed.push("a"); throw new Error("close failed"); } };
      },`,
    ),
    "b-good-close": plugin(
      "b-good-close",
      "upstream",
      `create() {
        return { async close() { globalThis.__kernelTestClosed.push("b"); } };
      },`,
    ),
    "c-no-close": plugin("c-no-close", "discovery", "create() { return { close: 1 }; },"),
  }, async (dir) => {
    const closed: string[] = [];
    const global = globalThis as { __kernelTestClosed?: string[] };
    global.__kernelTestClosed = closed;
    const { lines, logger } = memoryLogger();
    try {
      const k = kernel({ pluginDirs: [dir], logger });
      const events = record(k);
      await using(k, async () => {
        await k.start();
        assert.deepEqual(k.pluginFailures, []);
        await k.stop();
        assert.deepEqual(closed.toSorted(), ["a", "b"]);
        const warning = lines.find((l) => l.includes("plugin failed to close"));
        assert.ok(warning, lines.join("\n"));
        assert.match(warning, /^WARN/);
        assert.match(warning, /plugin=a-bad-close/);
        assert.match(warning, /close failed/);
        assert.ok(events.some((e) => e.type === "gateway.stopping"));
      });
      assert.equal(closed.length, 2, "a second stop() must not close plugins again");
    } finally {
      delete global.__kernelTestClosed;
    }
  });
});

Deno.test("Kernel stop closes a running transport plugin exactly once", async () => {
  await withPlugins({
    "fixture-http": plugin(
      "fixture-http",
      "transport",
      `transport: "fixture-http",
      create() {
        return {
          mode: "http",
          routes: [{
            path: "/fixture",
            methods: ["GET"],
            handle: async (_request, auth) => Response.json({ tenant: auth.tenant }),
          }],
          async close() { globalThis.__kernelTestTransportCloses += 1; },
        };
      },`,
    ),
  }, async (dir) => {
    const global = globalThis as { __kernelTestTransportCloses?: number };
    global.__kernelTestTransportCloses = 0;
    try {
      const k = kernel({ pluginDirs: [dir] });
      await using(k, async () => {
        const info = await k.start();
        const response = await fetch(`${info.url}/fixture`, {
          headers: { authorization: "Bearer t" },
        });
        assert.equal(response.status, 200);
        assert.deepEqual(await response.json(), { tenant: "default" });
        await k.stop();
        assert.equal(global.__kernelTestTransportCloses, 1);
      });
    } finally {
      delete global.__kernelTestTransportCloses;
    }
  });
});

Deno.test("Kernel stop is idempotent and resolves done", async () => {
  const k = kernel({ pluginDirs: [BUILTIN_PLUGIN_DIR] });
  await using(k, async () => {
    const info = await k.start();
    const first = k.stop();
    const second = k.stop();
    assert.equal(first, second);
    await first;
    await k.done;
    await k.stop();
    // The listener is gone after stop.
    await assert.rejects(fetch(`${info.url}/healthz`));
  });
});

Deno.test("Kernel done resolves even when start was refused", async () => {
  const k = kernel({ env: { MCP_SERVER_HOST: "0.0.0.0", MCP_SERVER_AUTH_TOKEN: "" } });
  await assert.rejects(k.start(), GatewayError);
  await k.stop();
  await k.done;
});

Deno.test("Kernel in stdio mode stops on its own when stdin ends", async () => {
  const k = kernel({
    env: { MCP_SERVER_TRANSPORT: "stdio" },
    pluginDirs: [BUILTIN_PLUGIN_DIR],
    stdio: {
      stdin: new ReadableStream({ start: (controller) => controller.close() }),
      stdout: new WritableStream(),
    },
  });
  const events = record(k);
  await using(k, async () => {
    const info = await k.start();
    assert.equal(info.transport, "stdio");
    assert.equal(info.url, undefined);
    await k.done;
    assert.ok(events.some((e) => e.type === "gateway.stopping"));
  });
});

Deno.test("Kernel refuses stdio mode with MCP_SERVER_ENABLED=false", async () => {
  const k = kernel({
    env: { MCP_SERVER_TRANSPORT: "stdio", MCP_SERVER_ENABLED: "false" },
    pluginDirs: [BUILTIN_PLUGIN_DIR],
  });
  await using(k, async () => {
    await assert.rejects(k.start(), (error: unknown) => {
      assert.ok(error instanceof GatewayError);
      assert.equal(error.code, "config_invalid");
      assert.match(error.message, /MCP_SERVER_ENABLED/);
      return true;
    });
  });
});

Deno.test("Kernel answers /readyz with 200 and status ready after start", async () => {
  await withPlugins(
    { thrower: plugin("thrower", "model", "create() { throw 1; },") },
    async (dir) => {
      const k = kernel({ pluginDirs: [BUILTIN_PLUGIN_DIR, dir] });
      await using(k, async () => {
        const info = await k.start();
        const response = await fetch(`${info.url}/readyz`);
        assert.equal(response.status, 200);
        const plugins = PLUGIN_KINDS.reduce((n, kind) => n + k.pluginsOf(kind).length, 0);
        assert.ok(plugins >= 3, "the built-in transports at least");
        assert.ok(k.pluginFailures.some((f) => f.path === `${dir}/thrower/mod.ts`));
        assert.deepEqual(await response.json(), {
          status: "ready",
          plugins,
          pluginFailures: k.pluginFailures.length,
          sessions: 0,
          toolCallsInFlight: 0,
          upstreams: [],
        });
      });
    },
  );
});

Deno.test("Kernel refuses a non-loopback host without auth and names MCP_SERVER_AUTH_TOKEN", async () => {
  const k = kernel({
    env: { MCP_SERVER_HOST: "0.0.0.0", MCP_SERVER_AUTH_TOKEN: "" },
    pluginDirs: [BUILTIN_PLUGIN_DIR],
  });
  const events = record(k);
  await using(k, async () => {
    await assert.rejects(k.start(), (error: unknown) => {
      assert.ok(error instanceof GatewayError);
      assert.equal(error.code, "config_invalid");
      assert.match(error.message, /0\.0\.0\.0/);
      assert.match(error.message, /MCP_SERVER_AUTH_TOKEN/);
      return true;
    });
    assert.ok(!events.some((e) => e.type === "plugin.loaded"), "no plugin is loaded first");
  });
});

Deno.test("Kernel refuses --no-auth on a non-loopback host", async () => {
  const k = kernel({
    env: { MCP_SERVER_HOST: "0.0.0.0" },
    flags: { noAuth: true },
    pluginDirs: [BUILTIN_PLUGIN_DIR],
  });
  await using(k, async () => {
    await assert.rejects(k.start(), (error: unknown) => {
      assert.ok(error instanceof GatewayError);
      assert.equal(error.code, "config_invalid");
      assert.match(error.message, /--no-auth/);
      assert.match(error.message, /MCP_SERVER_HOST/);
      return true;
    });
  });
});

Deno.test("Kernel generates a client token and a separate admin token on loopback when none is configured, and requires one on /mcp", async () => {
  const k = kernel({
    env: { MCP_SERVER_AUTH_TOKEN: "", MCP_HTTP_RESPONSE_MODE: "json" },
    pluginDirs: [BUILTIN_PLUGIN_DIR],
  });
  await using(k, async () => {
    const info = await k.start();
    assert.ok(info.url);
    assert.ok(info.generatedToken);
    assert.match(info.generatedToken, /^[A-Za-z0-9_-]{43}$/);
    assert.match(info.generatedAdminToken ?? "", /^[A-Za-z0-9_-]{43}$/);
    assert.notEqual(info.generatedAdminToken, info.generatedToken);

    const refused = await initialize(info.url);
    assert.equal(refused.status, 401);
    await refused.body?.cancel();

    const wrong = await initialize(info.url, "not-the-token");
    assert.equal(wrong.status, 401);
    await wrong.body?.cancel();

    const accepted = await initialize(info.url, info.generatedToken);
    assert.equal(accepted.status, 200);
    assert.ok(accepted.headers.get("mcp-session-id"));
    const body = await accepted.json();
    assert.equal(body.id, 1);
    assert.ok(body.result?.serverInfo, JSON.stringify(body));
  });
});

Deno.test("Kernel uses the configured client token, and generates only the admin token no source grants", async () => {
  const k = kernel({ env: { MCP_HTTP_RESPONSE_MODE: "json" }, pluginDirs: [BUILTIN_PLUGIN_DIR] });
  await using(k, async () => {
    const info = await k.start();
    assert.equal(info.generatedToken, undefined);
    assert.ok(info.generatedAdminToken);
    const accepted = await initialize(info.url!, "t");
    assert.equal(accepted.status, 200);
    await accepted.body?.cancel();
  });
});

Deno.test("Kernel serves /mcp without credentials under --no-auth on loopback, and warns", async () => {
  const { lines, logger } = memoryLogger();
  const k = kernel({
    env: { MCP_SERVER_AUTH_TOKEN: "", MCP_HTTP_RESPONSE_MODE: "json" },
    flags: { noAuth: true },
    pluginDirs: [BUILTIN_PLUGIN_DIR],
    logger,
  });
  await using(k, async () => {
    const info = await k.start();
    assert.equal(info.generatedToken, undefined);
    assert.ok(lines.some((l) => l.startsWith("WARN") && l.includes("AUTHENTICATION IS DISABLED")));
    const accepted = await initialize(info.url!);
    assert.equal(accepted.status, 200);
    await accepted.body?.cancel();
  });
});
