import assert from "node:assert/strict";
import {
  forgetSecrets,
  MIN_SECRET_LENGTH,
  redact,
  redactCut,
  redactDeep,
  REDACTED,
  redactRepeated,
  registerSecrets,
  serverSecrets,
} from "./redact.ts";

Deno.test("URL userinfo is redacted whole, host and path stay", () => {
  assert.equal(
    redact("connect to http://alice:pw-1@127.0.0.1:9/mcp failed"),
    "connect to http://[redacted]@127.0.0.1:9/mcp failed",
  );
  assert.equal(redact("https://ghp_tokenonly@github.com/x"), "https://[redacted]@github.com/x");
});

Deno.test("The value of a secret-named query parameter, flag or variable is redacted, its name stays", () => {
  assert.equal(
    redact("GET /mcp?api_key=abc123&page=2 refused"),
    "GET /mcp?api_key=[redacted]&page=2 refused",
  );
  assert.equal(redact("ran x --token=t0k --port=1"), "ran x --token=[redacted] --port=1");
  assert.equal(redact("ran x --api-key abc123 --port 1"), "ran x --api-key [redacted] --port 1");
  assert.equal(redact("env: MY_SECRET=s3cr3t OTHER=1"), "env: MY_SECRET=[redacted] OTHER=1");
  assert.equal(redact('body {"password": "hunter2"}'), 'body {"password": "[redacted]"}');
});

Deno.test("Authorization credentials and well-known key shapes are redacted anywhere in text", () => {
  assert.equal(redact("sent Bearer abc.def-123"), "sent Bearer [redacted]");
  assert.equal(
    redact('send "Authorization: Bearer <token>"'),
    'send "Authorization: Bearer <token>"',
  );
  assert.equal(redact("key sk-proj-0123456789abcdef leaked"), "key [redacted] leaked");
  assert.equal(redact("AKIAABCDEFGHIJKLMNOP"), "[redacted]");
});

Deno.test("Text without a credential passes unchanged", () => {
  const text =
    'Upstream "web" is FAILED, so tools/call cannot be forwarded; see /v1/operator/status';
  assert.equal(redact(text), text);
});

Deno.test("A registered secret value is scrubbed from any string, in its URL-encoded and JSON forms too", () => {
  const owner = {};
  registerSecrets(owner, ['plain value/with:specials"', "short"]);
  try {
    assert.equal(redact('got plain value/with:specials" back'), "got [redacted] back");
    assert.equal(redact(`q=${encodeURIComponent('plain value/with:specials"')}`), "q=[redacted]");
    assert.equal(
      redact(JSON.stringify({ e: 'plain value/with:specials"' })),
      '{"e":"[redacted]"}',
    );
    assert.equal(redact("short"), "short", `values under ${MIN_SECRET_LENGTH} characters are not`);
  } finally {
    forgetSecrets(owner);
  }
  assert.equal(redact('plain value/with:specials"'), 'plain value/with:specials"', "forgotten");
});

Deno.test("Registering again under the same owner replaces its values", () => {
  const owner = {};
  registerSecrets(owner, ["first-secret-value"]);
  registerSecrets(owner, ["second-secret-value"]);
  try {
    assert.equal(redact("first-secret-value"), "first-secret-value");
    assert.equal(redact("second-secret-value"), REDACTED);
  } finally {
    forgetSecrets(owner);
  }
});

Deno.test("redactDeep redacts every string in a structure and keeps its shape and keys", () => {
  const value = { a: ["http://u:p@h/", 1, null], b: { reason: "Bearer abcdefgh1" }, ok: true };
  assert.deepEqual(redactDeep(value), {
    a: ["http://[redacted]@h/", 1, null],
    b: { reason: "Bearer [redacted]" },
    ok: true,
  });
  assert.equal(value.a[0], "http://u:p@h/", "the original is untouched");
});

Deno.test("A fleet entry's secrets are its header values and credentials, env values, URL credentials and query values, and secret arguments", () => {
  const secrets = serverSecrets({
    url: "http://user-one:pass%40word@h/mcp?k=query-value",
    headers: { Authorization: "Bearer header-token" },
    env: { ANY_NAME: "env-value" },
    command: ["srv", "--api-key", "arg-secret", "--token=flag-secret", "--port", "8080"],
  });
  for (
    const expected of [
      "user-one",
      "pass@word",
      "query-value",
      "Bearer header-token",
      "header-token",
      "env-value",
      "arg-secret",
      "flag-secret",
    ]
  ) assert.ok(secrets.includes(expected), `${expected} is a secret`);
  assert.ok(!secrets.includes("8080") && !secrets.includes("srv"));
});

Deno.test("A scope: tenant entry's per-tenant header and env values are secrets too", () => {
  const secrets = serverSecrets({
    headers: {},
    env: {},
    tenants: {
      acme: { headers: { Authorization: "Bearer acme-token" }, env: {} },
      globex: { headers: {}, env: { TOKEN: "globex-env-value" } },
    },
  });
  for (const expected of ["Bearer acme-token", "acme-token", "globex-env-value"]) {
    assert.ok(secrets.includes(expected), `${expected} is a secret`);
  }
});

Deno.test("redactDeep keeps dates and byte arrays as they are and turns errors into their redacted message", () => {
  const at = new Date(0);
  const bytes = new Uint8Array([1, 2]);
  const out = redactDeep({ at, bytes, error: new Error("GET http://u:p@h/ failed") });
  assert.equal(out.at, at);
  assert.equal(out.bytes, bytes);
  assert.equal(out.error as unknown, "GET http://[redacted]@h/ failed");
});

Deno.test("redactCut redacts before cutting, and a cut text's trailing secret beginning too", () => {
  const owner = {};
  registerSecrets(owner, ["Qv7Zk2LmPwR9sTbX"]);
  try {
    assert.equal(redactCut(`${"x".repeat(6)}Qv7Zk2LmPwR9sTbX tail`, 10), "xxxxxx[red");
    assert.equal(redactCut("abc Qv7Zk2", 100, true), "abc [redacted]");
    // Not cut before: an ending that merely resembles a secret stays.
    assert.equal(redactCut("abc Qv7Zk2", 100), "abc Qv7Zk2");
  } finally {
    forgetSecrets(owner);
  }
});

Deno.test("A repeated text is redacted like any other, and again once the registered secrets change", () => {
  const owner = {};
  try {
    const rule = "allow tools/* for key-ABCDEFGH1234";
    assert.equal(redactRepeated(rule), redact(rule));
    registerSecrets(owner, ["key-ABCDEFGH1234"]);
    assert.equal(redactRepeated(rule), "allow tools/* for [redacted]");
    const long = `${"x".repeat(600)} key-ABCDEFGH1234`;
    assert.equal(
      redactRepeated(long),
      `${"x".repeat(600)} [redacted]`,
      "too long to keep, still redacted",
    );
    forgetSecrets(owner);
    assert.equal(redactRepeated(rule), rule);
  } finally {
    forgetSecrets(owner);
  }
});
