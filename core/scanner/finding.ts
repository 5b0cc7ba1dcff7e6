/**
 * Scan findings and severities: the scanner's output, shared by every report format.
 * @module
 */
import type { ScanEntityKind, ScanSeverity } from "../plugin_api/mod.ts";

/** Severities from least to most severe. */
export const SEVERITIES: readonly ScanSeverity[] = ["info", "low", "medium", "high", "critical"];

/** The rank of a severity; higher is worse. */
export function severityRank(severity: ScanSeverity): number {
  return SEVERITIES.indexOf(severity);
}

/** Parses a severity name, or undefined. */
export function parseSeverity(text: string): ScanSeverity | undefined {
  return SEVERITIES.find((s) => s === text.toLowerCase());
}

/** One problem found in one entity of one server. */
export interface Finding {
  /** The rule's stable id (also the SARIF ruleId). */
  rule: string;
  severity: ScanSeverity;
  server: string;
  entity: { kind: ScanEntityKind; name: string };
  /** JSON Pointer into the descriptor snapshot (`{ servers: [...] }`). */
  pointer: string;
  message: string;
  evidence: string;
  /** Stable across runs and server order: SHA-256 of rule, server, entity and relative pointer. */
  fingerprint: string;
}
