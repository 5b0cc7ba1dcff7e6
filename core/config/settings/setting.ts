/**
 * One environment variable's declaration: the zod schema that parses its text (unset or empty
 * parses to `undefined`), the value used when it is unset, its one-line meaning and its docs group.
 * The parsers here name the variable in every message, so an error says what to change.
 * @module
 */
import { z } from "zod";

/** The docs groups, in the order docs/configuration.md lists them. */
export const SETTING_GROUPS = {
  server: "Server and transports",
  auth: "Authentication",
  fleet: "Fleet and data",
  discovery: "Sync and discovery",
  engine: "Engine",
  governance: "Governance, approvals, audit and scanner",
  cluster: "Cluster (scale-out)",
  observability: "Logs and tracing",
  plugins: "Plugins",
} as const;

/** A docs group's key. */
export type SettingGroup = keyof typeof SETTING_GROUPS;

/** What every declared variable says about itself in the docs. */
export interface VariableDoc {
  group: SettingGroup;
  /** The default as docs show it, when it is not the plain `default` value (computed, or none). */
  shownDefault?: string;
  /** Words after the shown default value, e.g. what `--demo` sets instead. */
  defaultNote?: string;
  /** One line: what it does. */
  meaning: string;
}

/** A variable the gateway's config parses: its schema and, when it has one, its default. */
export interface Setting<S extends z.ZodType = z.ZodType, D = unknown> extends VariableDoc {
  schema: S;
  default?: D;
}

/** Declares one parsed variable; `default` must be a value its schema could produce. */
export function setting<
  S extends z.ZodType,
  D extends Exclude<z.output<S>, undefined> = never,
>(spec: Setting<S, D>): Setting<S, D> {
  return spec;
}

/** `true`/`false` (also 1/0, yes/no, on/off). */
export const bool = (name: string) =>
  z.string().optional().transform((value, ctx) => {
    if (value === undefined || value === "") return undefined;
    const v = value.toLowerCase();
    if (["1", "true", "yes", "on"].includes(v)) return true;
    if (["0", "false", "no", "off"].includes(v)) return false;
    ctx.addIssue({
      code: "custom",
      message: `${name} must be true or false, received "${value}"`,
    });
    return z.NEVER;
  });

/** An integer from `min` to `max`. */
export const int = (name: string, min: number, max: number) =>
  z.string().optional().transform((value, ctx) => {
    if (value === undefined || value === "") return undefined;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      ctx.addIssue({
        code: "custom",
        message: `${name} must be an integer from ${min} to ${max}, received "${value}"`,
      });
      return z.NEVER;
    }
    return n;
  });

/** One of `values` (case-insensitive), or an alias of one. */
export const oneOf = <T extends string>(
  name: string,
  values: readonly T[],
  aliases: Record<string, T> = {},
) =>
  z.string().optional().transform((value, ctx) => {
    if (value === undefined || value === "") return undefined;
    const v = value.toLowerCase();
    if ((values as readonly string[]).includes(v)) return v as T;
    if (Object.hasOwn(aliases, v)) return aliases[v]!;
    ctx.addIssue({
      code: "custom",
      message: `${name} must be one of ${values.join(", ")}, received "${value}"`,
    });
    return z.NEVER;
  });

/** Any text; empty counts as unset. */
export const text = z.string().optional().transform((v) =>
  v === undefined || v === "" ? undefined : v
);

/** A comma-separated list, each item trimmed, empty items dropped. */
export const list = text.transform((v) =>
  v === undefined ? undefined : v.split(",").map((s) => s.trim()).filter(Boolean)
);
