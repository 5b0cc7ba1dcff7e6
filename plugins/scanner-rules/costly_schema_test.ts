import assert from "node:assert/strict";
import { buildScanModel } from "../../core/scanner/normalize.ts";
import { doublingArguments, shapes } from "../../tests/support/hostile_schemas.ts";
import { costlySchema } from "./costly_schema.ts";

const CORPUS = new URL("../../tests/fixtures/scanner/corpus/benign-servers.jsonl", import.meta.url);

function findings(tools: Record<string, unknown>[]) {
  return costlySchema.check(buildScanModel([{ id: "s", tools }]));
}

Deno.test("costly-schema: a schema whose $refs double at every level is high, since every call is refused", () => {
  const [finding, ...more] = findings([
    { name: "ok", description: "Answers", inputSchema: doublingArguments(40) },
  ]);
  assert.equal(more.length, 0);
  assert.equal(finding?.entity.name, "ok");
  assert.equal(costlySchema.severity, "high");
  assert.match(finding!.message, /gateway refuses every call of it/);
  assert.equal(finding!.pointer, `${finding!.entity.pointer}/inputSchema`);
});

Deno.test("costly-schema: a schema nested past the stack is high too: it cannot be compiled", () => {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < 20_000; i++) schema = { allOf: [schema] };
  const [finding] = findings([{ name: "deep", description: "Deep", inputSchema: schema }]);
  assert.match(finding?.message ?? "", /nested too deeply to be compiled/);
});

Deno.test("costly-schema: a schema costly only for large arguments is not flagged", () => {
  assert.deepEqual(
    findings([{ name: "wide", description: "Counts", inputSchema: shapes(100) }]),
    [],
  );
});

Deno.test("costly-schema: no tool of the real servers in the benign corpus is flagged", async () => {
  let tools = 0;
  for (const line of (await Deno.readTextFile(CORPUS)).split("\n")) {
    if (line.trim() === "") continue;
    const server = JSON.parse(line) as { tools: Record<string, unknown>[] };
    tools += server.tools.length;
    assert.deepEqual(findings(server.tools), []);
  }
  assert.ok(tools > 100, `${tools} tools`);
});
