/**
 * `main.ts discover`: runs the discovery plugins (built-in and MCP_PLUGIN_PATHS) once and prints
 * what they found, or, with `--propose`, the fleet entries they would add (disabled unless the
 * source is in MCP_DISCOVERY_TRUSTED); `--apply` writes those. Exit codes: 0 done, 1 a plugin or
 * the fleet file failed, 2 bad usage.
 * @module
 */
import { type CommandIo, EXIT_USAGE, parseFlags } from "./command.ts";
import { InProcessEventBus } from "../core/bus/event_bus.ts";
import { systemClock } from "../core/support/clock.ts";
import { createLogger } from "../core/support/logger.ts";
import type { DiscoverySource, PluginContext } from "../core/plugin_api/mod.ts";
import {
  BUILTIN_PLUGIN_DIR,
  loadPlugins,
  pluginConfigSlice,
} from "../core/plugin_host/plugin_loader.ts";
import { parseFleetConfig } from "../core/proxy/fleet_config.ts";
import { FleetEditError } from "../core/proxy/fleet_writer.ts";
import {
  candidateProposals,
  collectCandidates,
  isDiscoverySource,
} from "../core/sync/discovery_service.ts";
import { applyProposals } from "../core/sync/sync_apply.ts";
import { fleetViewOf } from "../core/sync/fleet_view.ts";
import { trustedSources } from "../core/operator/sync_routes.ts";

/** `main.ts discover --help`. */
export const DISCOVER_HELP = `Usage: main.ts discover [options]

Runs the discovery plugins once and lists the MCP servers they find: Kubernetes Services
annotated agent33.io/mcp (k8s), tailnet peers tagged tag:mcp (tailscale), _mcp._tcp.local
announcements (lan), and any discovery plugin in MCP_PLUGIN_PATHS.

Options:
  --plugin NAME      Only this plugin (k8s, tailscale, lan, or a plugin's full name); repeatable
  --json             Print JSON
  --propose          Print the fleet entries they would add; an entry is enabled only when its
                     source is in MCP_DISCOVERY_TRUSTED (e.g. k8s,tailscale)
  --apply            With --propose: write them to the fleet file (atomic, comments kept)
  --config FILE      Fleet file (MCP_PROXY_CONFIG_PATH), to skip servers it already has
  --timeout SECONDS  How long to listen to live sources (default 5)
  --context NAME     The kubeconfig context for k8s (given to discovery plugins as config context)
  -h, --help         Show this help`;

/** Where the CLI writes. */
export interface DiscoverIo extends CommandIo {
  /** Plugin directories (default: the built-in one plus MCP_PLUGIN_PATHS). */
  pluginDirs?: string[];
}

/** Runs `discover` with `args`; returns the exit code. */
export async function runDiscoverCommand(args: string[], io: DiscoverIo): Promise<number> {
  const parsed = parseFlags(io, DISCOVER_HELP, {
    args,
    options: {
      plugin: { type: "string", multiple: true },
      json: { type: "boolean" },
      propose: { type: "boolean" },
      apply: { type: "boolean" },
      config: { type: "string" },
      timeout: { type: "string" },
      context: { type: "string" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (!parsed) return EXIT_USAGE;
  const { values } = parsed;
  const timeout = values.timeout === undefined ? 5 : Number(values.timeout);
  if (!(timeout > 0)) {
    io.err(`--timeout must be a positive number of seconds, received "${values.timeout}"`);
    return 2;
  }
  const fleetPath = values.config ?? io.env.MCP_PROXY_CONFIG_PATH;
  if (values.apply && (!values.propose || !fleetPath)) {
    io.err(
      "--apply needs --propose and a fleet file (--config FILE or MCP_PROXY_CONFIG_PATH)",
    );
    return 2;
  }
  const separator = Deno.build.os === "windows" ? ";" : ":";
  const dirs = io.pluginDirs ?? [
    BUILTIN_PLUGIN_DIR,
    ...(io.env.MCP_PLUGIN_PATHS ?? "").split(separator).map((p) => p.trim()).filter(Boolean),
  ];
  const { plugins, failures } = await loadPlugins(dirs);
  for (const failure of failures) io.err(`plugin ${failure.path} not loaded: ${failure.reason}`);
  const wanted = values.plugin ?? [];
  const chosen = plugins.filter(({ manifest }) =>
    manifest.kind === "discovery" &&
    (wanted.length === 0 ||
      wanted.some((w) => manifest.name === w || manifest.name === `discovery-${w}`))
  );
  const missing = wanted.filter((w) =>
    !chosen.some(({ manifest }) => manifest.name === w || manifest.name === `discovery-${w}`)
  );
  if (missing.length > 0) {
    const known = plugins.filter((p) => p.manifest.kind === "discovery").map((p) =>
      p.manifest.name
    );
    io.err(`No discovery plugin ${missing.join(", ")}; available: ${known.join(", ") || "none"}`);
    return 2;
  }
  const logger = createLogger({ sink: io.err });
  const sources: DiscoverySource[] = [];
  let failed = false;
  for (const { manifest } of chosen) {
    if (manifest.kind !== "discovery") continue;
    const ctx: PluginContext = {
      logger: logger.child(manifest.name),
      clock: systemClock,
      env: io.env,
      config: {
        ...pluginConfigSlice(
          manifest.name,
          Object.fromEntries(
            Object.entries(io.env).filter((e): e is [string, string] => e[1] !== undefined),
          ),
        ),
        ...(values.context !== undefined ? { context: values.context } : {}),
      },
      bus: new InProcessEventBus(),
      tools: { register: () => () => {} },
    };
    try {
      const source = await manifest.create(ctx);
      if (isDiscoverySource(source)) sources.push(source);
    } catch (error) {
      failed = true;
      io.err(`${manifest.name}: ${(error as Error).message}`);
    }
  }
  const { candidates, errors } = await collectCandidates(sources, timeout * 1000);
  for (const error of errors) io.err(error);
  failed ||= errors.length > 0;
  if (!values.propose) {
    io.out(
      values.json
        ? JSON.stringify({ candidates }, null, 2) + "\n"
        : candidates.map((c) =>
          `${c.source.padEnd(10)} ${c.id.padEnd(32)} ${c.transport.padEnd(5)} ${c.url}\n`
        ).join("") || "No MCP servers found.\n",
    );
    return failed ? 1 : 0;
  }
  const fleetText = fleetPath
    ? await Deno.readTextFile(fleetPath).catch((e) => {
      if (e instanceof Deno.errors.NotFound) return "";
      throw e;
    })
    : "";
  const proposals = candidateProposals(
    candidates,
    fleetViewOf(fleetText),
    trustedSources(io.env),
  );
  if (values.apply && proposals.length > 0) {
    const defaults = {
      separator: io.env.MCP_PROXY_TOOL_SEPARATOR ?? "__",
      healthIntervalSeconds: 30,
    };
    try {
      await applyProposals(
        fleetPath!,
        proposals,
        (text) => parseFleetConfig(text, fleetPath!, io.env, defaults),
      );
    } catch (error) {
      if (!(error instanceof FleetEditError)) throw error;
      io.err(`discover: ${error.message}`);
      return 1;
    }
  }
  io.out(
    values.json
      ? JSON.stringify({ proposals, applied: Boolean(values.apply) }, null, 2) + "\n"
      : (proposals.map((p) =>
        `  + ${p.server.padEnd(32)} ${String(p.entry?.url)}  ${p.reason}\n` +
        (p.warning ? `      warning: ${p.warning}\n` : "") +
        // Exactly the text --apply writes.
        (p.yaml ?? "").trimEnd().split("\n").map((line) => `      | ${line}\n`).join("")
      ).join("") || "Nothing new to propose.\n") +
        (values.apply && proposals.length > 0 ? `Written to ${fleetPath}.\n` : ""),
  );
  return failed ? 1 : 0;
}
