/**
 * The scanner's calibration targets, on the data shipped in tests/fixtures/scanner: recall on the
 * held-out attack split at ≥ medium, false-positive rates on the corpus of real published servers
 * at ≥ medium (approval) and ≥ high (quarantine), and the shape of that data.
 */
import assert from "node:assert/strict";
import { BUILTIN_RULES } from "../../plugins/scanner-rules/mod.ts";
import { calibrate } from "./calibration.ts";
import { readCalibrationData } from "./calibration_cli.ts";

const { labelled, corpus } = await readCalibrationData();
const result = calibrate(BUILTIN_RULES, labelled, corpus);

Deno.test("calibration data: every labelled record names its public source; the corpus is ≥ 500 tools of ≥ 30 published servers", () => {
  for (const r of labelled) {
    assert.match(r.source, /^https:\/\//, `${r.id} has a source URL`);
    assert.ok(r.split === "dev" || r.split === "heldout", `${r.id} is in a split`);
  }
  assert.ok(result.splits.heldout!.attacks >= 25, "held-out split has attacks");
  assert.ok(corpus.length >= 30, `${corpus.length} servers`);
  assert.ok(result.corpus.tools >= 500, `${result.corpus.tools} tools`);
  for (const server of corpus) assert.match(server.package, /^(@[\w.-]+\/)?[\w.-]+@\d[\w.+-]*$/);
});

Deno.test("calibration: recall on held-out attacks is at least 0.85 at medium and above", () => {
  const h = result.splits.heldout!;
  assert.ok(h.medium / h.attacks >= 0.85, `held-out recall ${h.medium}/${h.attacks}`);
  assert.equal(h.benignFlagged, 0, "no held-out hard negative is flagged");
});

Deno.test("calibration: on real servers at most 3% of tools are flagged at medium and 0.5% at high", () => {
  const k = result.corpus;
  assert.ok(k.flaggedMedium / k.tools <= 0.03, `≥medium ${k.flaggedMedium}/${k.tools}`);
  assert.ok(
    k.flaggedHigh / k.tools <= 0.005,
    `≥high ${k.flaggedHigh}/${k.tools}: ${k.highExamples}`,
  );
});
