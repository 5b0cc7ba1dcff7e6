/**
 * The scanner's in-process API: `scanServers(descriptors, rules) → findings`, which the CLI uses
 * and the kernel can call on every upstream (re)connect.
 * @module
 */
import { createHash } from "node:crypto";
import type { ScannerRule } from "../plugin_api/mod.ts";
import type { ServerDescriptor } from "./descriptor.ts";
import { type Finding, severityRank } from "./finding.ts";
import { buildScanModel } from "./normalize.ts";

/** A rule that threw: reported, never fatal, so one broken plugin cannot hide every finding. */
export interface RuleFailure {
  rule: string;
  error: string;
}

/** Findings, worst first, and the rules that failed. */
export interface ScanResult {
  findings: Finding[];
  ruleFailures: RuleFailure[];
}

/** Runs every rule over the fleet; duplicate findings (same fingerprint) are reported once. */
export function scanServers(
  descriptors: readonly ServerDescriptor[],
  rules: readonly ScannerRule[],
): ScanResult {
  const model = buildScanModel(descriptors);
  // Findings in a field the scanner cut say so: what follows the cut was not read.
  const truncated = new Map<string, { read: number; length: number }>();
  for (const server of model.servers) {
    for (const entity of server.entities) {
      for (const t of entity.texts) {
        if (t.truncatedFrom !== undefined && !t.decodedFrom) {
          truncated.set(t.pointer, { read: t.text.length, length: t.truncatedFrom });
        }
      }
    }
  }
  const findings = new Map<string, Finding>();
  const ruleFailures: RuleFailure[] = [];
  for (const rule of rules) {
    let raw;
    try {
      raw = rule.check(model);
    } catch (error) {
      ruleFailures.push({ rule: rule.id, error: (error as Error)?.message ?? String(error) });
      continue;
    }
    for (const f of raw) {
      const pointer = f.pointer ?? f.entity.pointer;
      const relative = pointer.startsWith(f.entity.pointer)
        ? pointer.slice(f.entity.pointer.length)
        : pointer;
      const fingerprint = createHash("sha256")
        .update(
          JSON.stringify([
            rule.id,
            f.entity.server,
            f.entity.kind,
            f.entity.name,
            relative,
            f.message,
          ]),
        )
        .digest("hex");
      if (findings.has(fingerprint)) continue;
      const cut = truncated.get(pointer);
      findings.set(fingerprint, {
        rule: rule.id,
        severity: f.severity ?? rule.severity,
        server: f.entity.server,
        entity: { kind: f.entity.kind, name: f.entity.name },
        pointer,
        message: cut && rule.id !== "oversized-text"
          ? `${f.message} (field truncated: scanned the first ${cut.read} of ${cut.length} characters)`
          : f.message,
        evidence: f.evidence ?? "",
        fingerprint,
      });
    }
  }
  const sorted = [...findings.values()].sort((a, b) =>
    severityRank(b.severity) - severityRank(a.severity) || a.server.localeCompare(b.server) ||
    a.pointer.localeCompare(b.pointer) || a.rule.localeCompare(b.rule)
  );
  return { findings: sorted, ruleFailures };
}
