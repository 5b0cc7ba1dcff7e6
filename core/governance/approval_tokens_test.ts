import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { ApprovalTokens, type ApprovalVerification } from "./approval_tokens.ts";
import { MemoryNonceStore, type NonceStore } from "./nonce_store.ts";

const SECRET = "an-approval-secret-that-is-at-least-32-bytes-long";
const HASH = "a".repeat(64);
const OTHER_HASH = "b".repeat(64);
const GRANT = { tenant: "acme", tool: "fs__delete", argumentsHash: HASH, requestId: "req-1" };
const EXPECTED = { tenant: "acme", tool: "fs__delete", argumentsHash: HASH };

function setup(
  options: { secret?: string | Uint8Array; ttlMs?: number; nonces?: NonceStore } = {},
) {
  const clock = new ManualClock(1_700_000_000_000);
  const nonces = options.nonces ?? new MemoryNonceStore({ clock });
  const tokens = new ApprovalTokens({
    secret: options.secret ?? SECRET,
    clock,
    nonces,
    ...(options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }),
  });
  return { clock, nonces, tokens };
}

function refusal(result: ApprovalVerification): { code: string; reason: string } {
  assert.equal(result.ok, false, "expected the token to be refused");
  if (result.ok) throw new Error("unreachable");
  return { code: result.code, reason: result.reason };
}

function b64url(text: string): string {
  return btoa(text).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** The request id of a verification that passed (fails the test otherwise). */
function granted(v: ApprovalVerification): string {
  assert.ok(v.ok, `expected the token to verify, got ${JSON.stringify(v)}`);
  return v.requestId;
}

function unb64url(text: string): string {
  return atob(text.replaceAll("-", "+").replaceAll("_", "/"));
}

Deno.test("an issued token verifies for the exact call and yields its request id", async () => {
  const { tokens, clock } = setup();
  const { token, expiresAt } = await tokens.issue(GRANT);
  assert.equal(expiresAt, clock.now() + 10 * 60 * 1000, "default lifetime is ten minutes");
  assert.match(token, /^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  assert.equal(granted(await tokens.verify(token, EXPECTED)), "req-1");
});

Deno.test("the token payload binds tenant, tool, hash, expiry, a 128-bit nonce and the request", async () => {
  const { tokens } = setup();
  const { token, expiresAt } = await tokens.issue(GRANT);
  const payload = JSON.parse(unb64url(token.split(".")[1]!));
  assert.deepEqual(Object.keys(payload).sort(), ["exp", "h", "n", "r", "t", "tool"]);
  assert.equal(payload.t, "acme");
  assert.equal(payload.tool, "fs__delete");
  assert.equal(payload.h, HASH);
  assert.equal(payload.exp, expiresAt);
  assert.equal(payload.r, "req-1");
  assert.match(payload.n, /^[0-9a-f]{32}$/);
  const again = JSON.parse(unb64url((await tokens.issue(GRANT)).token.split(".")[1]!));
  assert.notEqual(again.n, payload.n, "every token has its own nonce");
});

Deno.test("a token is single-use: the second redemption is approval_replayed", async () => {
  const { tokens } = setup();
  const { token } = await tokens.issue(GRANT);
  assert.equal((await tokens.verify(token, EXPECTED)).ok, true);
  const { code, reason } = refusal(await tokens.verify(token, EXPECTED));
  assert.equal(code, "approval_replayed");
  assert.match(reason, /already used.*request a new approval/);
});

Deno.test("a token past its expiry is approval_expired", async () => {
  const { tokens, clock } = setup({ ttlMs: 60_000 });
  const { token, expiresAt } = await tokens.issue(GRANT);
  clock.advance(59_999);
  const early = await tokens.issue({ ...GRANT, requestId: "req-2" });
  assert.equal((await tokens.verify(early.token, EXPECTED)).ok, true, "valid just before");
  clock.advance(1);
  const { code, reason } = refusal(await tokens.verify(token, EXPECTED));
  assert.equal(code, "approval_expired");
  assert.ok(reason.includes(new Date(expiresAt).toISOString()), reason);
  assert.match(reason, /request a new approval/);
});

Deno.test("a token for another tool is approval_mismatch naming both tools", async () => {
  const { tokens } = setup();
  const { token } = await tokens.issue(GRANT);
  const { code, reason } = refusal(await tokens.verify(token, { ...EXPECTED, tool: "fs__write" }));
  assert.equal(code, "approval_mismatch");
  assert.equal(
    reason,
    'The approval token was issued for tool "fs__delete"; request a new approval for "fs__write"',
  );
});

Deno.test("a token for another tenant is approval_mismatch without naming that tenant", async () => {
  const { tokens } = setup();
  const { token } = await tokens.issue(GRANT);
  const { code, reason } = refusal(await tokens.verify(token, { ...EXPECTED, tenant: "globex" }));
  assert.equal(code, "approval_mismatch");
  assert.match(reason, /different tenant.*as tenant "globex"/);
  assert.ok(!reason.includes("acme"), "the token's tenant is not disclosed");
});

Deno.test("a token for other arguments is approval_mismatch", async () => {
  const { tokens } = setup();
  const { token } = await tokens.issue(GRANT);
  const { code, reason } = refusal(
    await tokens.verify(token, { ...EXPECTED, argumentsHash: OTHER_HASH }),
  );
  assert.equal(code, "approval_mismatch");
  assert.match(reason, /different arguments/);
});

Deno.test("a mismatched presentation does not burn the nonce", async () => {
  const { tokens } = setup();
  const { token } = await tokens.issue(GRANT);
  refusal(await tokens.verify(token, { ...EXPECTED, tool: "other" }));
  refusal(await tokens.verify(token, { ...EXPECTED, tenant: "other" }));
  refusal(await tokens.verify(token, { ...EXPECTED, argumentsHash: OTHER_HASH }));
  assert.equal(granted(await tokens.verify(token, EXPECTED)), "req-1");
});

Deno.test("a token verified without consuming stays redeemable exactly once", async () => {
  const { tokens } = setup();
  const { token } = await tokens.issue(GRANT);
  const first = await tokens.verify(token, EXPECTED, { consume: false });
  const again = await tokens.verify(token, EXPECTED, { consume: false });
  assert.ok(first.ok && again.ok, "checking alone uses nothing up");
  assert.equal(await tokens.redeem(first.redemption), true);
  assert.equal(await tokens.redeem(again.redemption), false, "the nonce is single-use");
  assert.equal(refusal(await tokens.verify(token, EXPECTED)).code, "approval_replayed");
});

Deno.test("an invalid token never consumes a nonce", async () => {
  let consumed = 0;
  const { tokens } = setup({
    nonces: { consume: () => Promise.resolve(++consumed > 0) },
  });
  const { token } = await tokens.issue(GRANT);
  refusal(await tokens.verify(token.slice(0, -2), EXPECTED));
  assert.equal(consumed, 0);
});

Deno.test("a truncated token is approval_invalid and the reason says truncated", async () => {
  const { tokens } = setup();
  const { token } = await tokens.issue(GRANT);
  const [version, body, signature] = token.split(".") as [string, string, string];
  const cases = [
    token.slice(0, -4), // signature cut short
    `${version}.${body}`, // signature missing
    `${version}.${body}.`, // signature empty
    version, // only the version
  ];
  for (const candidate of cases) {
    const { code, reason } = refusal(await tokens.verify(candidate, EXPECTED));
    assert.equal(code, "approval_invalid", candidate);
    assert.match(reason, /truncated/, `${candidate}: ${reason}`);
  }
  assert.ok(signature.length > 4);
});

Deno.test("a tampered token is approval_invalid: the signature does not match", async () => {
  const { tokens } = setup();
  const { token } = await tokens.issue(GRANT);
  const [version, body, signature] = token.split(".") as [string, string, string];
  const payload = JSON.parse(unb64url(body));
  const widened = b64url(JSON.stringify({ ...payload, tool: "fs__write" }));
  const extended = b64url(JSON.stringify({ ...payload, exp: payload.exp + 3_600_000 }));
  for (
    const candidate of [`${version}.${widened}.${signature}`, `${version}.${extended}.${signature}`]
  ) {
    const { code, reason } = refusal(
      await tokens.verify(candidate, { ...EXPECTED, tool: payload.tool }),
    );
    assert.equal(code, "approval_invalid");
    assert.match(reason, /signature does not match.*altered/);
  }
});

Deno.test("a token forged with another secret is approval_invalid", async () => {
  const { tokens } = setup();
  const forger = setup({ secret: "some-other-secret-that-is-also-32-bytes-or-more" });
  const { token } = await forger.tokens.issue(GRANT);
  const { code, reason } = refusal(await tokens.verify(token, EXPECTED));
  assert.equal(code, "approval_invalid");
  assert.match(reason, /different secret/);
});

Deno.test("malformed tokens are approval_invalid with a reason for each", async () => {
  const { tokens } = setup();
  const { token } = await tokens.issue(GRANT);
  const [, body, signature] = token.split(".") as [string, string, string];
  const cases: [unknown, RegExp][] = [
    ["", /empty/],
    [undefined, /empty/],
    ["x".repeat(5000), /longer than 4096/],
    [`v2.${body}.${signature}`, /does not start with "v1\."/],
    [`Bearer ${token}`, /does not start with "v1\."/],
    [`${token}.extra`, /4 dot-separated parts/],
    [`v1.${body}!.${signature}`, /outside base64url/],
    [`v1.${body}.${signature.replaceAll("-", "+")}x`, /outside base64url|truncated or corrupt/],
  ];
  for (const [candidate, reason] of cases) {
    const result = refusal(await tokens.verify(candidate as string, EXPECTED));
    assert.equal(result.code, "approval_invalid", String(candidate));
    assert.match(result.reason, reason, String(candidate));
    assert.ok(!result.reason.includes(SECRET), "the secret is never echoed");
  }
});

Deno.test("replicas sharing the secret and the nonce store honour each other's tokens once", async () => {
  const clock = new ManualClock(0);
  const nonces = new MemoryNonceStore({ clock });
  const key = new TextEncoder().encode(SECRET);
  const a = new ApprovalTokens({ secret: key, clock, nonces });
  const b = new ApprovalTokens({ secret: SECRET, clock, nonces });
  const { token } = await a.issue(GRANT);
  assert.equal((await b.verify(token, EXPECTED)).ok, true);
  assert.equal(refusal(await a.verify(token, EXPECTED)).code, "approval_replayed");
});

Deno.test("a failing nonce store fails the verification closed", async () => {
  const { tokens } = setup({
    nonces: { consume: () => Promise.reject(new Error("KV unreachable")) },
  });
  const { token } = await tokens.issue(GRANT);
  await assert.rejects(tokens.verify(token, EXPECTED), /KV unreachable/);
});

Deno.test("the secret must be at least 32 bytes and the lifetime positive", () => {
  const clock = new ManualClock(0);
  const nonces = new MemoryNonceStore({ clock });
  assert.throws(
    () => new ApprovalTokens({ secret: "short", clock, nonces }),
    { name: "RangeError", message: /5 bytes; it needs at least 32/ },
  );
  assert.throws(
    () => new ApprovalTokens({ secret: new Uint8Array(31), clock, nonces }),
    RangeError,
  );
  for (const ttlMs of [0, -1, 1.5, NaN]) {
    assert.throws(() => new ApprovalTokens({ secret: SECRET, clock, nonces, ttlMs }), RangeError);
  }
});

Deno.test("issuing needs every grant field", async () => {
  const { tokens } = setup();
  await assert.rejects(tokens.issue({ ...GRANT, tool: "" }), {
    name: "TypeError",
    message: /non-empty tool/,
  });
});
