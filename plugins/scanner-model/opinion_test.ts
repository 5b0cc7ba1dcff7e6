/**
 * The optional second opinion: off unless a provider is configured; answers come from the
 * scripted model provider in the background, are cached by descriptor hash, and trigger a rescan.
 */
import assert from "node:assert/strict";
import { systemClock } from "../../core/support/clock.ts";
import { InProcessEventBus } from "../../core/bus/event_bus.ts";
import { silentLogger } from "../../core/support/logger.ts";
import type { ModelProvider, PluginContext, ScannerRule } from "../../core/plugin_api/mod.ts";
import { buildScanModel } from "../../core/scanner/normalize.ts";
import scripted from "../model-scripted/mod.ts";
import plugin from "./mod.ts";
import { modelOpinionRule, parseVerdict } from "./opinion.ts";

const ctx = (config: Record<string, unknown>, models?: () => ModelProvider[]): PluginContext => ({
  logger: silentLogger,
  clock: systemClock,
  env: {},
  config,
  bus: new InProcessEventBus(silentLogger),
  tools: { register: () => () => {} },
  ...(models ? { models } : {}),
});

async function scriptedProvider(
  text: string,
): Promise<{ provider: ModelProvider; calls: () => number; done: () => Promise<void> }> {
  const dir = await Deno.makeTempDir();
  const script = `${dir}/script.yaml`;
  await Deno.writeTextFile(script, JSON.stringify([{ text }]));
  const inner = await scripted.create(ctx({ script })) as ModelProvider;
  let n = 0;
  return {
    provider: { name: "scripted", complete: (r) => (n++, inner.complete(r)) },
    calls: () => n,
    done: () => Deno.remove(dir, { recursive: true }),
  };
}

const fleet = (description: string) =>
  buildScanModel([{ id: "s", tools: [{ name: "get_fact", description }] }]);

Deno.test("scanner-model is off by default: without MCP_PLUGIN_SCANNER_MODEL_PROVIDER it adds no rule", async () => {
  assert.deepEqual(await plugin.create(ctx({}, () => [])), []);
  const rules = await plugin.create(ctx({ provider: "scripted" }, () => [])) as ScannerRule[];
  assert.deepEqual(rules.map((r) => r.id), ["model-opinion"]);
});

Deno.test("model-opinion answers from its cache without waiting, asks the model once per descriptor in the background, and asks for a rescan", async () => {
  const model = await scriptedProvider(
    '{"verdict":"malicious","reason":"it hides an instruction"}',
  );
  try {
    const rule = modelOpinionRule({
      provider: "scripted",
      models: () => [model.provider],
      severity: "medium",
      concurrency: 2,
      timeoutMs: 5_000,
      cacheSize: 100,
      logger: silentLogger,
    });
    let rescans = 0;
    rule.onChange?.(() => rescans++);
    assert.deepEqual(
      rule.check(fleet("Get a random fact of the day.")),
      [],
      "nothing yet: never waits",
    );
    await rule.settled();
    assert.equal(model.calls(), 1);
    assert.equal(rescans, 1, "the scanner is told to rescan");
    const [finding] = rule.check(fleet("Get a random fact of the day."));
    assert.equal(finding?.entity.name, "get_fact");
    assert.match(
      finding!.message,
      /the model scripted judged it an attack: it hides an instruction/,
    );
    rule.check(fleet("Get a random fact of the day."));
    await rule.settled();
    assert.equal(model.calls(), 1, "cached by descriptor hash");
    rule.check(fleet("Get a fact."));
    await rule.settled();
    assert.equal(model.calls(), 2, "a changed descriptor is asked again");
  } finally {
    await model.done();
  }
});

Deno.test("model-opinion reads a benign or unclear answer as no finding", () => {
  assert.equal(parseVerdict('{"verdict":"benign","reason":"plain"}').malicious, false);
  assert.equal(parseVerdict("I am not sure.").malicious, false);
  assert.equal(parseVerdict("malicious: exfiltrates keys").malicious, true);
});
