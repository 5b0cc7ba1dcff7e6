/**
 * The one logger. It writes to stderr only: in stdio mode stdout carries the protocol. Every line
 * is redacted (core/support/redact.ts) before it is written, so no caller can log a secret by mistake.
 * @module
 */
import { redact, redactDeep } from "./redact.ts";

/** Log levels, least to most severe. */
export type LogLevel = "debug" | "info" | "warn" | "error";

const ORDER: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/** Structured fields attached to a log line. */
export type LogFields = Record<string, unknown>;

/** A leveled, structured logger. */
export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  /** A logger whose lines carry `scope`. */
  child(scope: string): Logger;
}

/** Where log lines go; stderr by default, a memory sink in tests. */
export type LogSink = (line: string) => void;

const encoder = new TextEncoder();
/** Writes a line to stderr synchronously so lines are never lost on exit. */
export const stderrSink: LogSink = (line) => {
  Deno.stderr.writeSync(encoder.encode(line + "\n"));
};

/** Options for {@link createLogger}. */
export interface LoggerOptions {
  level?: LogLevel;
  format?: "text" | "json";
  sink?: LogSink;
  scope?: string;
}

/** Creates a logger writing `text` (for people) or `json` (for log pipelines) lines. */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? "info";
  const format = options.format ?? "text";
  const sink = options.sink ?? stderrSink;
  const scope = options.scope;
  const write = (lvl: LogLevel, message: string, fields?: LogFields) => {
    if (ORDER[lvl] < ORDER[level]) return;
    message = redact(message);
    if (fields) fields = redactDeep(fields);
    if (format === "json") {
      sink(JSON.stringify({ ts: new Date().toISOString(), level: lvl, scope, message, ...fields }));
      return;
    }
    const extra = fields && Object.keys(fields).length > 0 ? " " + formatFields(fields) : "";
    sink(`${lvl.toUpperCase().padEnd(5)} ${scope ? `[${scope}] ` : ""}${message}${extra}`);
  };
  return {
    debug: (m, f) => write("debug", m, f),
    info: (m, f) => write("info", m, f),
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
    child: (s) => createLogger({ level, format, sink, scope: scope ? `${scope}/${s}` : s }),
  };
}

function formatFields(fields: LogFields): string {
  return Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" ");
}

/** A logger that drops everything. */
export const silentLogger: Logger = createLogger({ sink: () => {} });
