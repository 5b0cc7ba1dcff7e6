/**
 * Calibration of the scanner rules: recall on labelled attack descriptors (a development split
 * and a held-out split the rules were not tuned on) and false-positive rate on a corpus of real,
 * published servers' tools, at ≥ medium (approval) and ≥ high (quarantine), overall and per rule.
 * `deno task scanner:eval` prints it; the calibration test holds the targets.
 * @module
 */
import type { ScannerRule, ScanSeverity } from "../plugin_api/mod.ts";
import type { ServerDescriptor } from "./descriptor.ts";
import { severityRank } from "./finding.ts";
import { scanServers } from "./scan.ts";

/** One labelled descriptor: a tool, whether it is an attack, and where it came from. */
export interface LabelledRecord {
  id?: string;
  split?: string;
  class?: string;
  expected: "malicious" | "benign";
  /** False for behaviour-only attacks: harmless descriptors, harm in code; not counted. */
  detectable?: boolean;
  source: string;
  tool: Record<string, unknown>;
}

/** One server of the benign corpus: `package@version` and its tools/list. */
export interface CorpusRecord {
  package: string;
  tools: Record<string, unknown>[];
}

/** Recall at the two thresholds over a set of attacks, with what was missed. */
export interface RecallFigures {
  attacks: number;
  medium: number;
  high: number;
  missed: string[];
  /** Benign records of the split flagged at ≥ medium (hard negatives). */
  benign: number;
  benignFlagged: number;
  /** rule → attacks of the split it flags at ≥ medium. */
  perRule: Record<string, number>;
}

/** False positives on the corpus. */
export interface CorpusFigures {
  servers: number;
  tools: number;
  flaggedMedium: number;
  flaggedHigh: number;
  /** rule → tools it flags at ≥ medium / ≥ high. */
  perRule: Record<string, { medium: number; high: number }>;
  /** `package tool: rule (severity)` of every tool flagged at ≥ high. */
  highExamples: string[];
  mediumExamples: string[];
}

/** Everything `scanner:eval` reports. */
export interface Calibration {
  splits: Record<string, RecallFigures>;
  undetectable: number;
  corpus: CorpusFigures;
}

/** Parses JSON lines, naming the line of a bad record. */
export function parseJsonLines<T>(text: string, source: string): T[] {
  return text.split("\n").filter((l) => l.trim()).map((line, i) => {
    try {
      return JSON.parse(line) as T;
    } catch (error) {
      throw new Error(`${source}:${i + 1}: not JSON (${(error as Error).message})`);
    }
  });
}

function worstPerTool(
  server: ServerDescriptor,
  rules: readonly ScannerRule[],
): Map<string, { rule: string; severity: ScanSeverity }[]> {
  const out = new Map<string, { rule: string; severity: ScanSeverity }[]>();
  for (const f of scanServers([server], rules).findings) {
    if (f.entity.kind !== "tool") continue;
    const list = out.get(f.entity.name) ?? [];
    list.push({ rule: f.rule, severity: f.severity });
    out.set(f.entity.name, list);
  }
  return out;
}

const at = (list: { severity: ScanSeverity }[] | undefined, s: ScanSeverity) =>
  (list ?? []).some((f) => severityRank(f.severity) >= severityRank(s));

/** Scans each labelled record as its own server and each corpus server alone. */
export function calibrate(
  rules: readonly ScannerRule[],
  labelled: readonly LabelledRecord[],
  corpus: readonly CorpusRecord[],
): Calibration {
  const splits: Record<string, RecallFigures> = {};
  let undetectable = 0;
  for (const record of labelled) {
    const outOfScope = (record as { scope?: string }).scope === "out_of_descriptor_scope";
    if (record.expected === "malicious" && (record.detectable === false || outOfScope)) {
      undetectable++;
      continue;
    }
    const split = splits[record.split ?? "dev"] ??= {
      attacks: 0,
      medium: 0,
      high: 0,
      missed: [],
      benign: 0,
      benignFlagged: 0,
      perRule: {},
    };
    const name = String(record.tool.name ?? "tool");
    // Alone, so every tool finding is this record's (whatever name the record gives).
    const found = [...worstPerTool({ id: "labelled", tools: [record.tool] }, rules).values()]
      .flat();
    if (record.expected === "benign") {
      split.benign++;
      if (at(found, "medium")) split.benignFlagged++;
      continue;
    }
    split.attacks++;
    if (at(found, "medium")) split.medium++;
    else split.missed.push(`${record.id ?? name} (${record.class ?? "?"})`);
    if (at(found, "high")) split.high++;
    const flagging = found.filter((f) => severityRank(f.severity) >= severityRank("medium"));
    for (const rule of new Set(flagging.map((f) => f.rule))) {
      split.perRule[rule] = (split.perRule[rule] ?? 0) + 1;
    }
  }
  const figures: CorpusFigures = {
    servers: corpus.length,
    tools: 0,
    flaggedMedium: 0,
    flaggedHigh: 0,
    perRule: {},
    highExamples: [],
    mediumExamples: [],
  };
  for (const server of corpus) {
    figures.tools += server.tools.length;
    const found = worstPerTool({ id: server.package, tools: server.tools }, rules);
    for (const [tool, list] of found) {
      const describe = list.filter((f) => severityRank(f.severity) >= severityRank("medium"))
        .map((f) => `${f.rule} (${f.severity})`).join(", ");
      if (at(list, "medium")) {
        figures.flaggedMedium++;
        figures.mediumExamples.push(`${server.package} ${tool}: ${describe}`);
      }
      if (at(list, "high")) {
        figures.flaggedHigh++;
        figures.highExamples.push(`${server.package} ${tool}: ${describe}`);
      }
      for (const rule of new Set(list.map((f) => f.rule))) {
        const mine = list.filter((f) => f.rule === rule);
        const counts = figures.perRule[rule] ??= { medium: 0, high: 0 };
        if (at(mine, "medium")) counts.medium++;
        if (at(mine, "high")) counts.high++;
      }
    }
  }
  return { splits, undetectable, corpus: figures };
}

const pct = (n: number, d: number) => d === 0 ? "—" : (n / d).toFixed(3);

/** The report `scanner:eval` prints. */
export function renderCalibration(c: Calibration, verbose = false): string {
  const lines: string[] = [];
  lines.push("Recall on labelled attacks (each record scanned alone):");
  for (const [name, s] of Object.entries(c.splits)) {
    lines.push(
      `  ${name.padEnd(8)} ${String(s.attacks).padStart(3)} attacks: ≥medium ${
        pct(s.medium, s.attacks)
      } (${s.medium}), ≥high ${pct(s.high, s.attacks)} (${s.high}); benign hard negatives ` +
        `flagged ≥medium: ${s.benignFlagged} of ${s.benign}`,
    );
    if (s.missed.length) lines.push(`           missed: ${s.missed.join(", ")}`);
    const rules = Object.entries(s.perRule).sort((a, b) => b[1] - a[1]);
    lines.push(`           caught (≥medium) by: ${rules.map(([r, n]) => `${r} ${n}`).join(", ")}`);
  }
  lines.push(
    `  behaviour-only attacks (not detectable from descriptors, not counted): ${c.undetectable}`,
  );
  const k = c.corpus;
  lines.push("");
  lines.push(`False positives on ${k.tools} tools of ${k.servers} published npm servers:`);
  lines.push(
    `  ≥medium ${pct(k.flaggedMedium, k.tools)} (${k.flaggedMedium} tools), ≥high ${
      pct(k.flaggedHigh, k.tools)
    } (${k.flaggedHigh} tools)`,
  );
  lines.push("  per rule (tools flagged ≥medium / ≥high):");
  for (const [rule, n] of Object.entries(k.perRule).sort((a, b) => b[1].medium - a[1].medium)) {
    if (n.medium === 0) continue;
    lines.push(`    ${rule.padEnd(28)} ${String(n.medium).padStart(3)} / ${n.high}`);
  }
  const examples = verbose ? k.mediumExamples : k.highExamples;
  if (examples.length) {
    lines.push(verbose ? "  flagged ≥medium:" : "  flagged ≥high:");
    for (const e of examples) lines.push(`    ${e}`);
  }
  return lines.join("\n");
}
