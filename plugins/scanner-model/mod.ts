/**
 * `scanner-model`: an optional second opinion, off by default. With
 * `MCP_PLUGIN_SCANNER_MODEL_PROVIDER` set to a loaded model provider (`scripted`, `openai:gpt-…`,
 * as the engine's agents name them), every tool, prompt and resource descriptor is sent once to
 * that model for classification — in the background, never on a call's path, cached by the
 * descriptor's hash — and a "malicious" verdict becomes a `model-opinion` finding
 * (`MCP_PLUGIN_SCANNER_MODEL_SEVERITY`, default medium).
 * @module
 */
import { definePlugin, type ScannerRule } from "../../core/plugin_api/mod.ts";
import { modelOpinionRule } from "./opinion.ts";

const SEVERITIES = ["info", "low", "medium", "high", "critical"] as const;

export default definePlugin({
  name: "scanner-model",
  version: "1.0.0",
  kind: "scanner-rule",
  description:
    "Optional second opinion: a configured model classifies descriptors (off by default)",
  permissions: {},
  create(ctx): ScannerRule[] {
    const provider = typeof ctx.config.provider === "string" ? ctx.config.provider.trim() : "";
    if (!provider || !ctx.models) return [];
    const severity = SEVERITIES.find((s) => s === ctx.config.severity) ?? "medium";
    const number = (key: string, fallback: number, max: number) => {
      const n = Number(ctx.config[key]);
      return Number.isInteger(n) && n > 0 ? Math.min(n, max) : fallback;
    };
    return [
      modelOpinionRule({
        provider,
        models: ctx.models,
        severity,
        concurrency: number("concurrency", 2, 16),
        timeoutMs: number("timeout_ms", 30_000, 300_000),
        cacheSize: number("cache_size", 10_000, 1_000_000),
        logger: ctx.logger,
        clock: ctx.clock,
      }),
    ];
  },
});
