/**
 * The three report formats of a scan: text (grouped by server and severity), JSON and SARIF 2.1.0.
 *
 * JSON schema (`--format json`), version 1:
 *
 * ```text
 * {
 *   "version": 1,
 *   "complete": boolean,             // false when a server or rule failed (exit code 2)
 *   "failOn": "info"|"low"|"medium"|"high"|"critical",
 *   "servers": string[],             // ids that were scanned
 *   "failures": [{ "server", "error" }],          // servers that could not be read
 *   "ruleFailures": [{ "rule", "error" }],        // rules that threw
 *   "summary": { "<severity>": number },          // unsuppressed findings per severity
 *   "findings": [{
 *     "rule", "severity", "server",
 *     "entity": { "kind": "instructions"|"tool"|"prompt"|"resource"|"resource-template", "name" },
 *     "pointer",                     // JSON Pointer into the descriptor snapshot
 *     "message", "evidence", "fingerprint"   // fingerprint: stable SHA-256 hex
 *   }],
 *   "suppressed": [{ "finding": Finding, "suppression": { "rule", "server", "tool", "justification", "expires" } }],
 *   "expiredSuppressions": [Suppression]
 * }
 * ```
 * @module
 */
import type { ScannerRule, ScanSeverity } from "../plugin_api/mod.ts";
import type { CollectFailure } from "./collect.ts";
import { type Finding, SEVERITIES, severityRank } from "./finding.ts";
import type { RuleFailure } from "./scan.ts";
import type { SuppressedFinding, Suppression } from "./suppressions.ts";
import { GATEWAY_INFO } from "../support/version.ts";

/** Everything a report shows. */
export interface ScanReport {
  servers: string[];
  findings: Finding[];
  suppressed: SuppressedFinding[];
  expiredSuppressions: Suppression[];
  failures: CollectFailure[];
  ruleFailures: RuleFailure[];
  failOn: ScanSeverity;
  rules: readonly ScannerRule[];
}

/** Whether every server and rule ran. */
export function isComplete(report: ScanReport): boolean {
  return report.failures.length === 0 && report.ruleFailures.length === 0;
}

function summary(findings: readonly Finding[]): Record<ScanSeverity, number> {
  const counts = Object.fromEntries(SEVERITIES.map((s) => [s, 0])) as Record<ScanSeverity, number>;
  for (const f of findings) counts[f.severity]++;
  return counts;
}

/** The JSON report (schema in the module comment). */
export function renderJson(report: ScanReport): string {
  return JSON.stringify(
    {
      version: 1,
      complete: isComplete(report),
      failOn: report.failOn,
      servers: report.servers,
      failures: report.failures,
      ruleFailures: report.ruleFailures,
      summary: summary(report.findings),
      findings: report.findings,
      suppressed: report.suppressed,
      expiredSuppressions: report.expiredSuppressions,
    },
    null,
    2,
  ) + "\n";
}

/** The human report: servers, then findings worst first. */
export function renderText(report: ScanReport): string {
  const lines: string[] = [];
  const counts = summary(report.findings);
  const total = report.findings.length;
  const by = [...SEVERITIES].reverse().filter((s) => counts[s] > 0).map((s) => `${counts[s]} ${s}`);
  lines.push(
    `Scanned ${report.servers.length} server(s): ${total} finding(s)${
      by.length ? ` (${by.join(", ")})` : ""
    }; failing on ${report.failOn} and above.`,
  );
  for (const f of report.failures) {
    lines.push(`INCOMPLETE: server "${f.server}" could not be read: ${f.error}`);
  }
  for (const f of report.ruleFailures) {
    lines.push(`INCOMPLETE: rule "${f.rule}" failed: ${f.error}`);
  }
  for (const s of report.expiredSuppressions) {
    lines.push(
      `Expired suppression no longer applies: rule ${s.rule}, server ${s.server}, tool ${s.tool} (expired ${s.expires})`,
    );
  }
  const servers = [...new Set([...report.servers, ...report.findings.map((f) => f.server)])];
  for (const server of servers) {
    const mine = report.findings.filter((f) => f.server === server);
    lines.push("", `${server}: ${mine.length === 0 ? "no findings" : `${mine.length} finding(s)`}`);
    for (const severity of [...SEVERITIES].reverse()) {
      const group = mine.filter((f) => f.severity === severity);
      if (group.length === 0) continue;
      lines.push(`  ${severity.toUpperCase()}`);
      for (const f of group) {
        lines.push(`    [${f.rule}] ${f.entity.kind} "${f.entity.name}": ${f.message}`);
        lines.push(`      at ${f.pointer}`);
        if (f.evidence) lines.push(`      evidence: ${f.evidence}`);
      }
    }
  }
  if (report.suppressed.length > 0) {
    lines.push("", `${report.suppressed.length} finding(s) suppressed:`);
    for (const { finding: f, suppression: s } of report.suppressed) {
      lines.push(
        `  [${f.rule}] ${f.server} ${f.entity.kind} "${f.entity.name}" until ${s.expires}: ${s.justification}`,
      );
    }
  }
  return lines.join("\n") + "\n";
}

const LEVEL: Record<ScanSeverity, "error" | "warning" | "note"> = {
  critical: "error",
  high: "error",
  medium: "warning",
  low: "note",
  info: "note",
};

// Rule ids the pinning diff reports; they are not plugins but still need SARIF rule entries.
const PIN_RULES: { id: string; severity: ScanSeverity; description: string }[] = [
  {
    id: "rug-pull",
    severity: "critical",
    description: "Model-visible text gained instructions or sinks since it was pinned",
  },
  {
    id: "pin-text-changed",
    severity: "low",
    description: "Model-visible text changed cosmetically since it was pinned",
  },
  {
    id: "pin-structure-changed",
    severity: "medium",
    description: "Schema or annotations changed since they were pinned",
  },
  { id: "pin-added", severity: "medium", description: "An entity appeared since the pin" },
  { id: "pin-removed", severity: "low", description: "An entity disappeared since the pin" },
  { id: "pin-new-server", severity: "medium", description: "A server is not in the pin file" },
];

/** A SARIF 2.1.0 log: one run, stable rule ids, logical locations, partial fingerprints. */
export function renderSarif(report: ScanReport): string {
  const rules = [
    ...report.rules.map((r) => ({ id: r.id, severity: r.severity, description: r.description })),
    ...PIN_RULES,
  ];
  const index = new Map(rules.map((r, i) => [r.id, i]));
  const sarif = {
    $schema: "https://json.schemastore.org/sarif-2.1.0.json",
    version: "2.1.0",
    runs: [{
      tool: {
        driver: {
          name: "agent33-scan",
          version: GATEWAY_INFO.version,
          rules: rules.map((r) => ({
            id: r.id,
            name: r.id,
            shortDescription: { text: r.description },
            defaultConfiguration: { level: LEVEL[r.severity] },
            properties: { severity: r.severity },
          })),
        },
      },
      invocations: [{
        executionSuccessful: isComplete(report),
        toolExecutionNotifications: [
          ...report.failures.map((f) => ({
            level: "error",
            message: { text: `server "${f.server}" could not be read: ${f.error}` },
          })),
          ...report.ruleFailures.map((f) => ({
            level: "error",
            message: { text: `rule "${f.rule}" failed: ${f.error}` },
          })),
        ],
      }],
      results: [
        ...report.findings.map((f) => result(f, index, false)),
        ...report.suppressed.map((s) =>
          result(s.finding, index, true, s.suppression.justification)
        ),
      ],
    }],
  };
  return JSON.stringify(sarif, null, 2) + "\n";
}

function result(f: Finding, index: Map<string, number>, suppressed: boolean, justification = "") {
  const out: Record<string, unknown> = {
    ruleId: f.rule,
    level: LEVEL[f.severity],
    message: { text: `${f.entity.kind} "${f.entity.name}" on ${f.server}: ${f.message}` },
    locations: [{
      logicalLocations: [{
        name: f.entity.name,
        fullyQualifiedName: `${f.server}/${f.entity.kind}/${f.entity.name}`,
        kind: f.entity.kind === "tool" ? "function" : "object",
      }],
    }],
    partialFingerprints: { "agent33Finding/v1": f.fingerprint },
    properties: {
      severity: f.severity,
      server: f.server,
      pointer: f.pointer,
      evidence: f.evidence,
    },
  };
  const i = index.get(f.rule);
  if (i !== undefined) out.ruleIndex = i;
  if (suppressed) out.suppressions = [{ kind: "external", justification }];
  return out;
}

/** Whether any finding is at or above the threshold. */
export function failsThreshold(findings: readonly Finding[], failOn: ScanSeverity): boolean {
  return findings.some((f) => severityRank(f.severity) >= severityRank(failOn));
}
