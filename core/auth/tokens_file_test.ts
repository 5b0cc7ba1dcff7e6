import assert from "node:assert/strict";
import { loadTokensFile, parseTokensFile } from "./tokens_file.ts";

const HASH_A = "a".repeat(64);
const HASH_B = "b".repeat(64);

Deno.test("parseTokensFile maps each hash to its tenant, scopes and subject", () => {
  const tokens = parseTokensFile(
    `tokens:\n  - sha256: ${HASH_A}\n    tenant: acme\n    scopes: [mcp, operator]\n    subject: ci-bot\n`,
    "tokens.yaml",
  );
  assert.deepEqual(tokens.get(HASH_A), {
    tenant: "acme",
    scopes: ["mcp", "operator"],
    subject: "ci-bot",
    principal: '["tokens_file","ci-bot"]',
  });
});

Deno.test("parseTokensFile reads JSON too", () => {
  const tokens = parseTokensFile(
    JSON.stringify({ tokens: [{ sha256: HASH_A, tenant: "acme", scopes: [] }] }),
    "tokens.json",
  );
  assert.equal(tokens.get(HASH_A)?.tenant, "acme");
});

Deno.test("parseTokensFile lowercases hashes, derives a subject from the hash and grants mcp when absent", () => {
  const tokens = parseTokensFile(
    `tokens:\n  - sha256: ${"A".repeat(64)}\n    tenant: t\n`,
    "t.yaml",
  );
  assert.deepEqual(tokens.get(HASH_A), {
    tenant: "t",
    scopes: ["mcp"],
    subject: "token:aaaaaaaaaaaa",
    principal: '["tokens_file","token:aaaaaaaaaaaa"]',
  });
});

Deno.test("parseTokensFile refuses an unknown scope, naming the line and the scopes there are", () => {
  assert.throws(
    () =>
      parseTokensFile(
        `tokens:\n  - sha256: ${HASH_A}\n    tenant: a\n    scopes: [amdin]\n`,
        "t.yaml",
      ),
    /tokens\[0\]\.scopes\[0\] \(line 4\) "amdin" is not a scope; use mcp, approver, operator, admin/,
  );
});

Deno.test("parseTokensFile names the line of a bad hash and how to make one", () => {
  assert.throws(
    () =>
      parseTokensFile(
        `tokens:\n  - sha256: ${HASH_A}\n    tenant: a\n  - sha256: nothex\n    tenant: b\n`,
        "tokens.yaml",
      ),
    {
      message: 'Cannot load tokens file "tokens.yaml": tokens[1].sha256 (line 4) must be 64 hex ' +
        "characters — hash the token with: printf %s TOKEN | sha256sum",
    },
  );
});

Deno.test("parseTokensFile names the entry's line when a required field is missing", () => {
  assert.throws(
    () => parseTokensFile(`tokens:\n  - sha256: ${HASH_A}\n    scopes: [mcp]\n`, "t.yaml"),
    { message: 'Cannot load tokens file "t.yaml": tokens[0].tenant (line 2) is required' },
  );
});

Deno.test("parseTokensFile rejects unknown fields so typos like `scope` are not silently ignored", () => {
  assert.throws(
    () =>
      parseTokensFile(`tokens:\n  - sha256: ${HASH_A}\n    tenant: a\n    scope: [x]\n`, "t.yaml"),
    { message: 'Cannot load tokens file "t.yaml": tokens[0].scope (line 4) is not a known field' },
  );
});

Deno.test("parseTokensFile rejects a duplicate hash naming both lines", () => {
  assert.throws(
    () =>
      parseTokensFile(
        `tokens:\n  - sha256: ${HASH_A}\n    tenant: a\n  - sha256: ${HASH_B}\n    tenant: b\n` +
          `  - sha256: ${HASH_A}\n    tenant: c\n`,
        "t.yaml",
      ),
    {
      message: 'Cannot load tokens file "t.yaml": tokens[2].sha256 (line 6) repeats the hash at ' +
        "tokens[0].sha256 (line 2); list each token once",
    },
  );
});

Deno.test("parseTokensFile reports YAML syntax errors with a line", () => {
  assert.throws(() => parseTokensFile(`tokens:\n  - sha256: [unclosed\n`, "t.yaml"), {
    message: /^Cannot load tokens file "t\.yaml": \(line \d+\) is not valid YAML: /,
  });
});

Deno.test("parseTokensFile rejects an empty file", () => {
  assert.throws(() => parseTokensFile("", "t.yaml"), {
    message:
      'Cannot load tokens file "t.yaml": the file (line 1) must be a mapping with a "tokens" list',
  });
});

Deno.test("loadTokensFile names the file when it cannot be read", async () => {
  await assert.rejects(
    loadTokensFile("missing.yaml", () => Promise.reject(new Error("No such file"))),
    { message: 'Cannot load tokens file "missing.yaml": No such file' },
  );
});

Deno.test("parseTokensFile keeps a hash that reads like a number as a string", () => {
  const hash = `${"1".repeat(60)}e123`;
  const tokens = parseTokensFile(`tokens:\n  - sha256: ${hash}\n    tenant: 42\n`, "t.yaml");
  assert.equal(tokens.get(hash)?.tenant, "42");
});
