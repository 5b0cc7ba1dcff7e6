import assert from "node:assert/strict";
import { applyProposals } from "./sync_apply.ts";
import type { SyncProposal } from "./sync_plan.ts";

const add = (id: string): SyncProposal => ({
  id: `add:${id}`,
  action: "add",
  server: id,
  source: "registry",
  name: `io.github.t/${id}`,
  to: "1.0.0",
  entry: { id, url: `https://${id}.example.com/mcp` },
  reason: "new",
});

Deno.test("Sync turns a flow list into a block list so every added entry keeps its marker", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/fleet.yaml`;
    await Deno.writeTextFile(path, "# top\nproxy_servers: []\n");
    await applyProposals(path, [add("a"), add("b")], (t) => t);
    assert.equal(
      await Deno.readTextFile(path),
      "# top\nproxy_servers:\n  # synced from registry: io.github.t/a@1.0.0\n  - id: a\n" +
        "    url: https://a.example.com/mcp\n  # synced from registry: io.github.t/b@1.0.0\n" +
        "  - id: b\n    url: https://b.example.com/mcp\n",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Removing the first synced entry removes its marker too", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/fleet.yaml`;
    await Deno.writeTextFile(path, "proxy_servers:\n");
    await applyProposals(path, [add("a")], (t) => t);
    await applyProposals(path, [{ ...add("a"), id: "remove:a", action: "remove" }], (t) => t);
    assert.equal(await Deno.readTextFile(path), "proxy_servers:\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("A fleet file the validator refuses is left byte-for-byte unchanged", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/fleet.yaml`;
    await Deno.writeTextFile(path, "proxy_servers:\n");
    await assert.rejects(
      applyProposals(path, [add("a")], () => {
        throw new Error("refused");
      }),
      /refused/,
    );
    assert.equal(await Deno.readTextFile(path), "proxy_servers:\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
