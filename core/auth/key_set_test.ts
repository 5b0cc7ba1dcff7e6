import assert from "node:assert/strict";
import { exportJWK, generateKeyPair, jwtVerify, SignJWT } from "jose";
import { MAX_DOCUMENT_BYTES } from "./bounded_fetch.ts";
import { KEY_SET_MAX_AGE_MS, keySet } from "./key_set.ts";

const URL_ = new URL("https://idp.example/jwks");
const COOLDOWN_MS = 30_000;

/** A provider whose key set and health the test changes, counting its fetches. */
function provider() {
  const signers = new Map<string, CryptoKey>();
  const published: object[] = [];
  const state = { fetches: 0, answer: "keys" as "keys" | "429" | "huge" | "junk", t: 0 };
  const publish = async (kid: string) => {
    const { publicKey, privateKey } = await generateKeyPair("ES256");
    signers.set(kid, privateKey);
    published.push({ ...(await exportJWK(publicKey)), kid, alg: "ES256" });
  };
  const keys = keySet({
    url: URL_,
    cooldownMs: COOLDOWN_MS,
    now: () => state.t,
    fetch: () => {
      state.fetches++;
      if (state.answer === "429") {
        return Promise.resolve(new Response("slow down", { status: 429 }));
      }
      if (state.answer === "huge") {
        return Promise.resolve(new Response("x".repeat(MAX_DOCUMENT_BYTES + 1)));
      }
      if (state.answer === "junk") return Promise.resolve(Response.json({ nokeys: true }));
      return Promise.resolve(Response.json({ keys: published }));
    },
  });
  const token = (kid: string) => {
    const key = signers.get(kid) ?? signers.values().next().value!;
    return new SignJWT({}).setProtectedHeader({ alg: "ES256", kid }).setExpirationTime("1h")
      .sign(key);
  };
  const verify = async (kid: string) => {
    try {
      await jwtVerify(await token(kid), keys);
      return "ok";
    } catch (e) {
      return e instanceof Error ? e.message : String(e);
    }
  };
  return { state, publish, verify };
}

Deno.test("a key set that cannot be read is fetched again only after the cooldown, however many tokens arrive", async () => {
  const p = provider();
  await p.publish("k1");
  p.state.answer = "429";
  for (let i = 0; i < 50; i++) {
    assert.match(
      await p.verify("k1"),
      /Cannot read the key set https:\/\/idp.example\/jwks: HTTP 429/,
    );
  }
  assert.equal(p.state.fetches, 1);
  p.state.answer = "keys";
  p.state.t += COOLDOWN_MS;
  assert.equal(await p.verify("k1"), "ok");
  assert.equal(p.state.fetches, 2);
});

Deno.test("a failed refresh pauses the next one by the cooldown too: junk key ids cannot hammer a struggling provider", async () => {
  const p = provider();
  await p.publish("k1");
  assert.equal(await p.verify("k1"), "ok");
  p.state.t += COOLDOWN_MS;
  p.state.answer = "429";
  for (let i = 0; i < 100; i++) assert.notEqual(await p.verify(`junk${i}`), "ok");
  assert.equal(p.state.fetches, 2, "one refresh, however many unknown key ids");
  assert.equal(await p.verify("k1"), "ok", "the keys read before still verify");
});

Deno.test("a token signed by a key published since the last fetch verifies after one refetch (rotation)", async () => {
  const p = provider();
  await p.publish("k1");
  assert.equal(await p.verify("k1"), "ok");
  await p.publish("k2");
  assert.notEqual(await p.verify("k2"), "ok", "within the cooldown the new key is not fetched");
  assert.equal(p.state.fetches, 1);
  p.state.t += COOLDOWN_MS;
  assert.equal(await p.verify("k2"), "ok");
  assert.equal(p.state.fetches, 2);
});

Deno.test("keys past their max age are fetched again on use, and kept when that fetch fails", async () => {
  const p = provider();
  await p.publish("k1");
  assert.equal(await p.verify("k1"), "ok");
  p.state.t += KEY_SET_MAX_AGE_MS;
  p.state.answer = "429";
  assert.equal(await p.verify("k1"), "ok", "a provider down is no lockout");
  assert.equal(p.state.fetches, 2);
});

Deno.test("tokens arriving together share one fetch", async () => {
  const p = provider();
  await p.publish("k1");
  const verdicts = await Promise.all(Array.from({ length: 20 }, () => p.verify("k1")));
  assert.deepEqual(new Set(verdicts), new Set(["ok"]));
  assert.equal(p.state.fetches, 1);
});

Deno.test("a key set over the size bound, or a document that is not one, is refused naming the URL", async () => {
  const huge = provider();
  await huge.publish("k1");
  huge.state.answer = "huge";
  assert.match(await huge.verify("k1"), /idp\.example\/jwks is larger than 262144 bytes/);
  const junk = provider();
  await junk.publish("k1");
  junk.state.answer = "junk";
  assert.match(await junk.verify("k1"), /idp\.example\/jwks is not a JSON Web Key Set/);
});
