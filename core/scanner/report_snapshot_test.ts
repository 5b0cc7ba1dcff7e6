/**
 * Snapshot tests of the scanner's three outputs for one fixed descriptor snapshot, and the SARIF
 * output validated against the official SARIF 2.1.0 JSON schema.
 *
 * To accept an intended change of output: UPDATE_SNAPSHOTS=1 deno test -A core/scanner/report_snapshot_test.ts
 */
import assert from "node:assert/strict";
import { Ajv } from "ajv";
import sarifSchema from "@microsoft/jest-sarif/lib/schemas/sarif-2.1.0-rtm.5.json" with {
  type: "json",
};
import { BUILTIN_RULES } from "../../plugins/scanner-rules/mod.ts";
import { parseSnapshot } from "./descriptor.ts";
import { renderJson, renderSarif, renderText, type ScanReport } from "./report.ts";
import { scanServers } from "./scan.ts";

const FIXTURES = new URL("../../tests/fixtures/scanner/", import.meta.url).pathname;

async function report(): Promise<ScanReport> {
  const text = await Deno.readTextFile(`${FIXTURES}snapshot.json`);
  const snapshot = parseSnapshot(JSON.parse(text), "snapshot.json");
  const { findings, ruleFailures } = scanServers(snapshot.servers, BUILTIN_RULES);
  return {
    servers: snapshot.servers.map((s) => s.id),
    findings,
    suppressed: [],
    expiredSuppressions: [],
    failures: [],
    ruleFailures,
    failOn: "high",
    rules: BUILTIN_RULES,
  };
}

async function matchesSnapshot(name: string, actual: string): Promise<void> {
  const path = `${FIXTURES}${name}`;
  if (Deno.env.get("UPDATE_SNAPSHOTS")) await Deno.writeTextFile(path, actual);
  assert.equal(
    actual,
    await Deno.readTextFile(path),
    `${name} differs; see the test's header to update`,
  );
}

Deno.test("the text report matches its snapshot", async () => {
  await matchesSnapshot("report.txt", renderText(await report()));
});

Deno.test("the JSON report matches its snapshot", async () => {
  await matchesSnapshot("report.json", renderJson(await report()));
});

Deno.test("the SARIF report matches its snapshot", async () => {
  await matchesSnapshot("report.sarif", renderSarif(await report()));
});

Deno.test("the SARIF report validates against the official SARIF 2.1.0 schema", async () => {
  // The published schema is draft-04 and has one pattern that is not valid under the u flag;
  // ajv checks the rest as draft-07 (the keywords it uses mean the same in both).
  const { $schema: _draft, id: _id, ...schema } = sarifSchema as Record<string, unknown>;
  const ajv = new Ajv({
    strict: false,
    allErrors: true,
    unicodeRegExp: false,
    validateFormats: false,
  });
  const validate = ajv.compile(schema);
  const sarif = JSON.parse(renderSarif(await report()));
  assert.ok(sarif.runs[0].results.length > 0, "the fixture has findings");
  assert.equal(validate(sarif), true, JSON.stringify(validate.errors, null, 2));
  // And the validator does reject a broken log, so the check above means something.
  assert.equal(validate({ version: "2.1.0", runs: [{ results: [] }] }), false);
});
