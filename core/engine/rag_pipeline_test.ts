import assert from "node:assert/strict";
import { RAGPipeline, splitPassages } from "./rag_pipeline.ts";

Deno.test("passages split at headings and blank lines, with their offset", () => {
  const text = "# Title\n\nFirst para.\n\n## Sub\nSecond\npara.\n";
  const passages = splitPassages("a.md", text);
  assert.deepEqual(passages.map((p) => [p.heading, p.text]), [
    ["Title", "First para."],
    ["Sub", "Second\npara."],
  ]);
  for (const p of passages) assert.ok(text.slice(p.offset).startsWith(p.text));
});

Deno.test("only changed files are reindexed, and removed ones dropped", async () => {
  const dir = await Deno.makeTempDir({ prefix: "agent33-rag-" });
  try {
    await Deno.writeTextFile(`${dir}/a.md`, "Bananas are yellow.");
    await Deno.writeTextFile(`${dir}/b.txt`, "Cherries are red.");
    const rag = new RAGPipeline(dir);
    assert.deepEqual(await rag.refresh(), { indexed: ["a.md", "b.txt"], removed: [] });
    assert.deepEqual(await rag.refresh(), { indexed: [], removed: [] });
    await Deno.writeTextFile(`${dir}/a.md`, "Bananas are yellow and sweet, really.");
    await Deno.remove(`${dir}/b.txt`);
    assert.deepEqual(await rag.refresh(), { indexed: ["a.md"], removed: ["b.txt"] });
    assert.equal(rag.search("cherries").length, 0);
    assert.equal(rag.search("sweet bananas")[0]?.source, "a.md");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
