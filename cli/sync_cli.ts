/**
 * `main.ts sync`: compares the fleet file with an MCP registry, prints the proposed changes, and
 * with `--apply` writes them. Exit codes: 0 done, 1 the registry or the fleet file refused, 2 bad
 * usage.
 * @module
 */
import { type CommandIo, EXIT_USAGE, parseFlags } from "./command.ts";
import { parseFleetConfig } from "../core/proxy/fleet_config.ts";
import { FleetEditError } from "../core/proxy/fleet_writer.ts";
import type { ResolveHost } from "../core/support/private_address.ts";
import { RegistryError } from "../core/sync/registry_client.ts";
import { applySyncResult, planFromRegistry, type SyncResult } from "../core/sync/sync_run.ts";

/** `main.ts sync --help`. */
export const SYNC_HELP = `Usage: main.ts sync --registry <URL|FILE> [options]

Compares the fleet file with an MCP registry (GET /v0.1/servers) and proposes changes: add new
servers (npm packages run under sandbox: deno, remotes over http or sse), update versions, disable
deprecated or deleted ones, remove synced entries gone from the registry. Entries sync writes are
marked "# synced from registry: <name>@<version>"; hand-written entries are never touched.

A registry is not trusted: new entries are written enabled: false (unless the registry is in
MCP_SYNC_TRUSTED_REGISTRIES), they may reference only the variables in MCP_SYNC_ENV_ALLOW (never
MCP_*), and each server that declares a path gets its own directory <MCP_DATA_DIR>/servers/<id>
(default ./.agent33/servers/<id>). Every proposal shows the YAML it writes.

Options:
  --registry URL|FILE   Registry base URL (e.g. https://registry.modelcontextprotocol.io), or a
                        saved /v0.1/servers response (a path or a file:// URL), e.g.
                        examples/registry/servers.json
  --config FILE         Fleet file (MCP_PROXY_CONFIG_PATH)
  --apply               Write the changes (atomic, comments kept, backup in <fleet>.bak)
  --json                Print the plan as JSON
  --search TEXT         Only servers the registry matches
  --include GLOB        Only registry names matching GLOB (repeatable)
  --full                Ignore <fleet>.sync.json and read the whole registry
  --timeout SECONDS     Per-request timeout (default 30)
  -h, --help            Show this help`;

/** Where the CLI writes. */
/** The command's I/O, and (for tests) the resolver remote hosts are looked up with. */
export type SyncIo = CommandIo & { resolveHost?: ResolveHost };

/** Runs `sync` with `args`; returns the exit code. */
export async function runSyncCommand(args: string[], io: SyncIo): Promise<number> {
  const parsed = parseFlags(io, SYNC_HELP, {
    args,
    options: {
      registry: { type: "string" },
      config: { type: "string" },
      apply: { type: "boolean" },
      json: { type: "boolean" },
      search: { type: "string" },
      include: { type: "string", multiple: true },
      full: { type: "boolean" },
      timeout: { type: "string" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (!parsed) return EXIT_USAGE;
  const { values } = parsed;
  const fleetPath = values.config ?? io.env.MCP_PROXY_CONFIG_PATH;
  if (!values.registry || !fleetPath) {
    io.err(
      `${
        values.registry
          ? "No fleet file: pass --config FILE or set MCP_PROXY_CONFIG_PATH"
          : "--registry is required"
      }\n\n${SYNC_HELP}`,
    );
    return 2;
  }
  const timeout = values.timeout === undefined ? 30 : Number(values.timeout);
  if (!(timeout > 0)) {
    io.err(`--timeout must be a positive number of seconds, received "${values.timeout}"`);
    return 2;
  }
  try {
    const result = await planFromRegistry({
      registry: values.registry,
      fleetPath,
      env: io.env,
      timeoutMs: timeout * 1000,
      ...(io.resolveHost ? { resolveHost: io.resolveHost } : {}),
      ...(values.full ? { full: true } : {}),
      ...(values.search ? { search: values.search } : {}),
      ...(values.include ? { include: values.include } : {}),
    });
    let applied: { changed: boolean } | undefined;
    if (values.apply) {
      const defaults = {
        separator: io.env.MCP_PROXY_TOOL_SEPARATOR ?? "__",
        healthIntervalSeconds: 30,
      };
      applied = await applySyncResult(
        result,
        (text) => parseFleetConfig(text, fleetPath, io.env, defaults),
      );
    }
    io.out(
      values.json
        ? JSON.stringify({ ...result, applied: applied?.changed ?? false }, null, 2) + "\n"
        : renderPlan(result, applied),
    );
    return 0;
  } catch (error) {
    if (error instanceof RegistryError || error instanceof FleetEditError) {
      io.err(`sync: ${error.message}`);
      return 1;
    }
    throw error;
  }
}

const SIGNS = { add: "+", update: "~", disable: "!", remove: "-" } as const;

/** The plan as text, one line per proposal. */
export function renderPlan(result: SyncResult, applied?: { changed: boolean }): string {
  const lines = [
    `Registry ${result.registry} (${
      result.updatedSince ? `changes since ${result.updatedSince}` : "full listing"
    }) against ${result.fleetPath}:`,
  ];
  if (result.proposals.length === 0) lines.push("  no changes");
  for (const p of result.proposals) {
    lines.push(
      `  ${SIGNS[p.action]} ${p.action.padEnd(7)} ${p.server.padEnd(24)} ${
        p.name ?? ""
      }  ${p.reason}`,
    );
    // Exactly the text an add or update writes.
    if (p.yaml) lines.push(...p.yaml.trimEnd().split("\n").map((line) => `      | ${line}`));
  }
  if (result.skipped.length > 0) {
    lines.push("Skipped:");
    for (const s of result.skipped) {
      lines.push(`  ${s.name}${s.version ? `@${s.version}` : ""}: ${s.reason}`);
    }
  }
  if (result.unchanged.length > 0) lines.push(`Unchanged: ${result.unchanged.join(", ")}`);
  if (applied) {
    lines.push(
      applied.changed
        ? `Applied ${result.proposals.length} change(s) to ${result.fleetPath} (previous text in ${result.fleetPath}.bak)`
        : "Nothing to write.",
    );
  } else if (result.proposals.length > 0) {
    lines.push(`Run again with --apply to write ${result.fleetPath}.`);
  }
  return lines.join("\n") + "\n";
}
