/**
 * `main.ts scan`: reads descriptors (snapshot file, one stdio or URL server, or the fleet),
 * runs the scanner-rule plugins, applies suppressions and pins, and reports.
 *
 * Exit codes: 0 clean, 1 a finding at or above `--fail-on`, 2 scan incomplete (a server could
 * not be read, a rule failed, or bad usage) — a server that failed to connect never yields 0.
 * @module
 */
import { type CommandIo, EXIT_USAGE, parseFlags } from "./command.ts";
import type { ScanSeverity } from "../core/plugin_api/mod.ts";
import {
  type CollectFailure,
  collectFleet,
  collectStdio,
  collectUrl,
  message,
  splitCommand,
} from "../core/scanner/collect.ts";
import { readSnapshot, type ServerDescriptor } from "../core/scanner/descriptor.ts";
import { parseSeverity } from "../core/scanner/finding.ts";
import { createPin, diffPin, parsePin } from "../core/scanner/pin.ts";
import {
  failsThreshold,
  isComplete,
  renderJson,
  renderSarif,
  renderText,
  type ScanReport,
} from "../core/scanner/report.ts";
import { loadScannerRules } from "../core/scanner/rules.ts";
import { scanServers } from "../core/scanner/scan.ts";
import {
  applySuppressions,
  readSuppressions,
  type Suppression,
} from "../core/scanner/suppressions.ts";

/** `main.ts scan --help`. */
export const SCAN_HELP = `Usage: main.ts scan [inputs] [options]

Scans MCP server descriptors (tools, prompts, resources, instructions) for poisoning,
exfiltration, shadowing and hygiene problems, with the rules of the scanner-rule plugins.

Inputs (combinable; default: the fleet of --config / MCP_PROXY_CONFIG_PATH):
  --descriptors FILE     A descriptor snapshot { "servers": [ { "id", "tools", … } ] }
  --stdio "CMD ARGS"     Spawn one stdio MCP server and read it
  --url URL              Read one server over Streamable HTTP (legacy SSE as fallback)
  --id NAME              Server id for --stdio / --url (default "stdio" / "url")
  --config FILE          Fleet YAML: read every enabled upstream through the sandboxed workers
  --timeout SECONDS      Per-server connect-and-list timeout for --stdio / --url (default 30)

Options:
  --format text|json|sarif   Report format (default text)
  --output FILE              Write the report to FILE instead of stdout
  --fail-on SEVERITY         info|low|medium|high|critical (default high)
  --suppressions FILE        YAML list of {rule, server, tool, justification, expires}
  --save FILE                Write the descriptors read as a snapshot
  --pin FILE                 Write a lock of SHA-256 hashes of every entity
  --pinned FILE              Report changes since the lock (rug pulls are critical)
  -h, --help                 Show this help

Exit codes: 0 clean, 1 findings at or above --fail-on, 2 scan incomplete or bad usage.`;

/** Where the command writes; injectable for tests. */
export interface ScanIo extends CommandIo {
  now?: Date;
}

/** Runs `scan` with its arguments; returns the exit code. */
export async function runScanCommand(args: string[], io: ScanIo): Promise<number> {
  const parsed = parseFlags(io, SCAN_HELP, {
    args,
    options: {
      descriptors: { type: "string" },
      stdio: { type: "string" },
      url: { type: "string" },
      id: { type: "string" },
      config: { type: "string" },
      timeout: { type: "string" },
      format: { type: "string", default: "text" },
      output: { type: "string" },
      "fail-on": { type: "string", default: "high" },
      suppressions: { type: "string" },
      save: { type: "string" },
      pin: { type: "string" },
      pinned: { type: "string" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (!parsed) return EXIT_USAGE;
  const { values } = parsed;
  const format = values.format;
  if (format !== "text" && format !== "json" && format !== "sarif") {
    io.err(`--format must be text, json or sarif, not "${format}"`);
    return 2;
  }
  const failOn = parseSeverity(values["fail-on"]);
  if (!failOn) {
    io.err(`--fail-on must be info, low, medium, high or critical, not "${values["fail-on"]}"`);
    return 2;
  }
  const timeoutMs = Math.round(Number(values.timeout ?? "30") * 1000);
  if (!(timeoutMs > 0)) {
    io.err(`--timeout must be a positive number of seconds`);
    return 2;
  }

  const descriptors: ServerDescriptor[] = [];
  const failures: CollectFailure[] = [];
  let suppressions: Suppression[] = [];
  let pinned;
  try {
    if (values.suppressions) suppressions = await readSuppressions(values.suppressions);
    if (values.pinned) pinned = parsePin(JSON.parse(await Deno.readTextFile(values.pinned)));
    if (values.descriptors) descriptors.push(...(await readSnapshot(values.descriptors)).servers);
    const config = values.config ??
      (values.descriptors || values.stdio || values.url ? undefined : io.env.MCP_PROXY_CONFIG_PATH);
    if (config) {
      const fleet = await collectFleet(config, io.env);
      descriptors.push(...fleet.descriptors);
      failures.push(...fleet.failures);
    }
  } catch (error) {
    io.err(`Cannot scan: ${message(error)}`);
    return 2;
  }
  if (values.stdio !== undefined) {
    const id = values.id ?? "stdio";
    try {
      descriptors.push(await collectStdio(splitCommand(values.stdio), id, timeoutMs));
    } catch (error) {
      failures.push({ server: id, error: message(error) });
    }
  }
  if (values.url !== undefined) {
    const id = values.id ?? "url";
    try {
      descriptors.push(await collectUrl(values.url, id, timeoutMs));
    } catch (error) {
      failures.push({ server: id, error: message(error) });
    }
  }
  if (descriptors.length === 0 && failures.length === 0) {
    io.err(
      `Nothing to scan: give --descriptors, --stdio, --url or --config (or set MCP_PROXY_CONFIG_PATH).\n\n${SCAN_HELP}`,
    );
    return 2;
  }
  const ids = descriptors.map((d) => d.id);
  const duplicate = ids.find((id, i) => ids.indexOf(id) !== i);
  if (duplicate) {
    io.err(`Two servers have the id "${duplicate}"; give --id a different name`);
    return 2;
  }

  const { rules, problems } = await loadScannerRules(
    (io.env.MCP_PLUGIN_PATHS ?? "").split(":").map((p) => p.trim()).filter(Boolean),
  );
  for (const problem of problems) io.err(`Plugin problem: ${problem}`);
  const scan = scanServers(descriptors, rules);
  const findings = pinned
    ? [...scan.findings, ...diffPin(pinned, descriptors, rules)]
    : scan.findings;
  const applied = applySuppressions(findings, suppressions, io.now ?? new Date());
  const report: ScanReport = {
    servers: ids,
    findings: applied.findings,
    suppressed: applied.suppressed,
    expiredSuppressions: applied.expired,
    failures,
    ruleFailures: scan.ruleFailures,
    failOn: failOn as ScanSeverity,
    rules,
  };
  const text = format === "json"
    ? renderJson(report)
    : format === "sarif"
    ? renderSarif(report)
    : renderText(report);
  try {
    if (values.save) {
      await Deno.writeTextFile(
        values.save,
        JSON.stringify({ servers: descriptors }, null, 2) + "\n",
      );
    }
    if (values.pin) {
      await Deno.writeTextFile(values.pin, JSON.stringify(createPin(descriptors), null, 2) + "\n");
    }
    if (values.output) await Deno.writeTextFile(values.output, text);
    else io.out(text);
  } catch (error) {
    io.err(`Cannot write: ${message(error)}`);
    return 2;
  }
  for (const s of applied.expired) {
    io.err(
      `Suppression for rule ${s.rule} (server ${s.server}, tool ${s.tool}) expired on ${s.expires}`,
    );
  }
  if (!isComplete(report)) return 2;
  return failsThreshold(report.findings, failOn) ? 1 : 0;
}
