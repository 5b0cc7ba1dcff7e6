import assert from "node:assert/strict";
import { createLogger, type LoggerOptions } from "./logger.ts";

function memoryLogger(options: LoggerOptions = {}) {
  const lines: string[] = [];
  return { lines, logger: createLogger({ ...options, sink: (line) => lines.push(line) }) };
}

Deno.test("createLogger logs info and above by default", () => {
  const { lines, logger } = memoryLogger();
  logger.debug("d");
  logger.info("i");
  logger.warn("w");
  logger.error("e");
  assert.deepEqual(lines, ["INFO  i", "WARN  w", "ERROR e"]);
});

Deno.test("createLogger drops lines below the configured level", () => {
  const { lines, logger } = memoryLogger({ level: "warn" });
  logger.debug("d");
  logger.info("i");
  logger.warn("w");
  logger.error("e");
  assert.deepEqual(lines, ["WARN  w", "ERROR e"]);
});

Deno.test("createLogger at debug level logs everything", () => {
  const { lines, logger } = memoryLogger({ level: "debug" });
  logger.debug("d");
  assert.deepEqual(lines, ["DEBUG d"]);
});

Deno.test("createLogger text format appends fields as key=value", () => {
  const { lines, logger } = memoryLogger();
  logger.info("started", { port: 8787, host: "127.0.0.1", tags: ["a"] });
  assert.deepEqual(lines, [`INFO  started port=8787 host=127.0.0.1 tags=["a"]`]);
});

Deno.test("createLogger json format writes ts, level, scope, message and the fields", () => {
  const { lines, logger } = memoryLogger({ format: "json", scope: "kernel" });
  logger.warn("slow upstream", { server: "db", ms: 1200 });
  assert.equal(lines.length, 1);
  const line = JSON.parse(lines[0]!);
  assert.equal(typeof line.ts, "string");
  assert.equal(new Date(line.ts).toISOString(), line.ts);
  const { ts: _ts, ...rest } = line;
  assert.deepEqual(rest, {
    level: "warn",
    scope: "kernel",
    message: "slow upstream",
    server: "db",
    ms: 1200,
  });
});

Deno.test("createLogger json format omits scope when there is none", () => {
  const { lines, logger } = memoryLogger({ format: "json" });
  logger.info("hi");
  assert.ok(!("scope" in JSON.parse(lines[0]!)));
});

Deno.test("Logger.child scopes its lines, nesting scopes with /", () => {
  const { lines, logger } = memoryLogger();
  const plugins = logger.child("plugins");
  plugins.info("loaded");
  plugins.child("echo").info("ready");
  logger.info("root");
  assert.deepEqual(lines, ["INFO  [plugins] loaded", "INFO  [plugins/echo] ready", "INFO  root"]);
});

Deno.test("Logger.child keeps the parent's level, format and sink", () => {
  const { lines, logger } = memoryLogger({ level: "error", format: "json" });
  const child = logger.child("auth");
  child.warn("dropped");
  child.error("kept");
  assert.equal(lines.length, 1);
  const line = JSON.parse(lines[0]!);
  assert.equal(line.scope, "auth");
  assert.equal(line.message, "kept");
});
