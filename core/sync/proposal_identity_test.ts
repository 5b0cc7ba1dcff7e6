import assert from "node:assert/strict";
import { digestText, listedProposals, proposalDigest } from "./proposal_identity.ts";
import { type SyncProposal, withYaml } from "./sync_plan.ts";

const add = (url: string): SyncProposal =>
  withYaml({
    id: "add:notes",
    action: "add",
    server: "notes",
    source: "registry",
    name: "io.github.t/notes",
    to: "1.0.0",
    entry: { id: "notes", url },
    reason: "new",
  });

const removal = (server: string, from: string): SyncProposal => ({
  id: `remove:${server}`,
  action: "remove",
  server,
  source: "registry",
  name: `io.github.t/${server}`,
  from,
  reason: "gone",
});

Deno.test("An add's digest is of its yaml: another URL under the same id is another digest", () => {
  assert.equal(digestText(add("https://a.example.com/mcp")), add("https://a.example.com/mcp").yaml);
  assert.notEqual(
    proposalDigest(add("https://a.example.com/mcp")),
    proposalDigest(add("https://b.example.com/mcp")),
  );
  assert.match(proposalDigest(add("https://a.example.com/mcp")), /^[0-9a-f]{64}$/);
});

Deno.test("A remove's or disable's digest is a stable text of its action, server and version", () => {
  assert.equal(digestText(removal("notes", "1.0.0")), "remove notes io.github.t/notes@1.0.0");
  assert.notEqual(
    proposalDigest(removal("notes", "1.0.0")),
    proposalDigest(removal("notes", "2.0.0")),
  );
  // planSync gives a disable the registry's `version`, outside the declared fields.
  const disable = { ...removal("notes", "1.0.0"), id: "disable:notes", action: "disable" as const };
  delete disable.from;
  Object.assign(disable, { version: "1.1.0" });
  assert.equal(digestText(disable), "disable notes io.github.t/notes@1.1.0");
});

Deno.test("Of two proposals with one id the first is listed and the other reported, never both", () => {
  const first = add("https://a.example.com/mcp");
  const second = { ...add("http://192.168.1.66/mcp"), source: "discovery:lan" };
  const shadowed: string[] = [];
  const listed = listedProposals(
    [first, second],
    (kept, other) => shadowed.push(`${other.source} behind ${kept.source}`),
  );
  assert.deepEqual(listed.map((p) => p.digest), [proposalDigest(first)]);
  assert.deepEqual(shadowed, ["discovery:lan behind registry"]);
});
