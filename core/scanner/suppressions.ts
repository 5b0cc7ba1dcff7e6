/**
 * Suppression files: accepted findings, each with a justification and an expiry date, so an
 * exception is a reviewed, time-boxed decision. An expired entry stops applying and is reported.
 *
 * ```yaml
 * suppressions:
 *   - rule: no-schema-validation   # rule id or glob
 *     server: github               # glob, default *
 *     tool: "create_*"             # glob over the entity name, default *
 *     justification: upstream validates arguments itself   # required
 *     expires: 2026-12-31          # required, YYYY-MM-DD
 * ```
 * @module
 */
import { parse } from "yaml";
import { GatewayError } from "../support/errors.ts";
import { compileGlob } from "../support/glob.ts";
import type { Finding } from "./finding.ts";

/** One suppression entry. */
export interface Suppression {
  rule: string;
  server: string;
  tool: string;
  justification: string;
  /** `YYYY-MM-DD`; the entry applies through the end of that day (UTC). */
  expires: string;
}

/** A finding with the entry that suppressed it. */
export interface SuppressedFinding {
  finding: Finding;
  suppression: Suppression;
}

/** The outcome of applying suppressions. */
export interface SuppressionResult {
  findings: Finding[];
  suppressed: SuppressedFinding[];
  expired: Suppression[];
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** Parses and validates a suppression file's text; every problem names its entry. */
export function parseSuppressions(text: string, source = "suppressions"): Suppression[] {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (error) {
    throw invalid(source, [`is not YAML: ${(error as Error).message}`]);
  }
  const list = (doc as { suppressions?: unknown } | null)?.suppressions ?? doc;
  if (!Array.isArray(list)) throw invalid(source, ["must hold a list under `suppressions:`"]);
  const problems: string[] = [];
  const out: Suppression[] = [];
  list.forEach((entry, i) => {
    const e = (entry ?? {}) as Record<string, unknown>;
    const at = `entry ${i + 1}`;
    const expires = e.expires instanceof Date ? e.expires.toISOString().slice(0, 10) : e.expires;
    if (typeof e.rule !== "string" || !e.rule) problems.push(`${at}: rule is required`);
    if (typeof e.justification !== "string" || !e.justification.trim()) {
      problems.push(`${at}: justification is required`);
    }
    if (typeof expires !== "string" || !DATE.test(expires) || Number.isNaN(Date.parse(expires))) {
      problems.push(`${at}: expires is required, as a date YYYY-MM-DD`);
    }
    for (const key of ["server", "tool"]) {
      if (e[key] !== undefined && typeof e[key] !== "string") {
        problems.push(`${at}: ${key} must be a glob string`);
      }
    }
    const known = new Set(["rule", "server", "tool", "justification", "expires"]);
    for (const key of Object.keys(e)) {
      if (!known.has(key)) problems.push(`${at}: unknown key "${key}"`);
    }
    out.push({
      rule: String(e.rule),
      server: typeof e.server === "string" ? e.server : "*",
      tool: typeof e.tool === "string" ? e.tool : "*",
      justification: String(e.justification),
      expires: String(expires),
    });
  });
  if (problems.length > 0) throw invalid(source, problems);
  return out;
}

/** Reads a suppression file. */
export async function readSuppressions(path: string): Promise<Suppression[]> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    throw invalid(path, [`cannot read: ${(error as Error).message}`]);
  }
  return parseSuppressions(text, path);
}

/** Splits findings into kept and suppressed; expired entries never apply. */
export function applySuppressions(
  findings: readonly Finding[],
  suppressions: readonly Suppression[],
  now: Date,
): SuppressionResult {
  const today = now.toISOString().slice(0, 10);
  const active = suppressions.filter((s) => s.expires >= today);
  const expired = suppressions.filter((s) => s.expires < today);
  const matchers = active.map((s) => ({
    s,
    rule: compileGlob(s.rule),
    server: compileGlob(s.server),
    tool: compileGlob(s.tool),
  }));
  const result: SuppressionResult = { findings: [], suppressed: [], expired };
  for (const finding of findings) {
    const hit = matchers.find((m) =>
      m.rule(finding.rule) && m.server(finding.server) && m.tool(finding.entity.name)
    );
    if (hit) result.suppressed.push({ finding, suppression: hit.s });
    else result.findings.push(finding);
  }
  return result;
}

function invalid(source: string, problems: string[]): GatewayError {
  return new GatewayError("config_invalid", `${source}: ${problems.join("; ")}`, {
    path: source,
    problems,
  });
}
