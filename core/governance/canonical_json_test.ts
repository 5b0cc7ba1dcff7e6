import assert from "node:assert/strict";
import { argumentsHash, canonicalJson, sha256Hex } from "./canonical_json.ts";

Deno.test("canonical JSON sorts object keys recursively and has no whitespace", () => {
  const value = { b: 1, a: { z: [3, { y: true, x: null }], c: "s" } };
  assert.equal(canonicalJson(value), '{"a":{"c":"s","z":[3,{"x":null,"y":true}]},"b":1}');
});

Deno.test("canonical JSON is the same whatever order the keys were written in", () => {
  assert.equal(
    canonicalJson({ a: 1, b: { c: 2, d: 3 } }),
    canonicalJson({ b: { d: 3, c: 2 }, a: 1 }),
  );
});

Deno.test("canonical JSON keeps array order", () => {
  assert.equal(canonicalJson([3, 1, 2]), "[3,1,2]");
  assert.notEqual(canonicalJson([1, 2]), canonicalJson([2, 1]));
});

Deno.test("canonical JSON sorts keys by UTF-16 code units", () => {
  assert.equal(
    canonicalJson({ "é": 1, "z": 2, "A": 3, "10": 4, "9": 5 }),
    '{"10":4,"9":5,"A":3,"z":2,"é":1}',
  );
});

Deno.test("canonical JSON escapes strings as JSON does and prints -0 as 0", () => {
  assert.equal(canonicalJson('a"b\n\u0001'), JSON.stringify('a"b\n\u0001'));
  assert.equal(canonicalJson(-0), "0");
  assert.equal(canonicalJson(1e21), "1e+21");
  assert.equal(canonicalJson(0.1), "0.1");
});

Deno.test("canonical JSON omits undefined object properties, as the wire does", () => {
  assert.equal(canonicalJson({ a: undefined, b: 1 }), '{"b":1}');
});

Deno.test("canonical JSON rejects values JSON cannot carry with a TypeError naming the path", () => {
  const cases: [unknown, RegExp][] = [
    [undefined, /\$ is undefined/],
    [[1, undefined], /\$\[1\] is undefined/],
    // deno-lint-ignore no-sparse-arrays
    [[1, , 3], /\$\[1\] is undefined/],
    [{ a: NaN }, /\$\.a is NaN/],
    [{ a: [Infinity] }, /\$\.a\[0\] is Infinity/],
    [{ f: () => 1 }, /\$\.f is a function/],
    [{ s: Symbol("x") }, /\$\.s is a symbol/],
    [{ n: 1n }, /\$\.n is a bigint/],
    [{ d: new Date(0) }, /\$\.d is a Date, not a plain JSON object/],
    [new Map(), /\$ is a Map/],
  ];
  for (const [value, message] of cases) {
    assert.throws(() => canonicalJson(value), (error: Error) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.match(error.message, message);
      return true;
    });
  }
});

Deno.test("canonical JSON rejects cycles but accepts the same object twice", () => {
  const shared = { x: 1 };
  assert.equal(canonicalJson({ a: shared, b: [shared] }), '{"a":{"x":1},"b":[{"x":1}]}');
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  assert.throws(() => canonicalJson(cyclic), {
    name: "TypeError",
    message: /\$\.self is a circular reference/,
  });
});

Deno.test("canonical JSON accepts null-prototype objects", () => {
  const bare = Object.assign(Object.create(null), { b: 2, a: 1 });
  assert.equal(canonicalJson(bare), '{"a":1,"b":2}');
});

Deno.test("canonical JSON keeps a __proto__ key from the wire as a key", () => {
  const parsed = JSON.parse('{"b":1,"__proto__":{"x":1}}');
  assert.equal(canonicalJson(parsed), '{"__proto__":{"x":1},"b":1}');
  assert.equal(canonicalJson(JSON.parse('{"__proto__":[2],"a":0}')), '{"__proto__":[2],"a":0}');
});

/** Keys sorted by code unit, written by hand: what canonical JSON is, without its fast path. */
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(",")}]`;
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  const record = value as Record<string, unknown>;
  return `{${
    Object.keys(record).sort().filter((k) => record[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${reference(record[k])}`).join(",")
  }}`;
}

Deno.test("canonical JSON of random values is the text of keys sorted by code unit", () => {
  let seed = 0x2545f491;
  const next = (n: number) => {
    seed ^= seed << 13, seed ^= seed >>> 17, seed ^= seed << 5;
    return (seed >>> 0) % n;
  };
  const KEYS = [
    "a",
    "b",
    "B",
    "é",
    "\ud800",
    "😀",
    "",
    "__proto__",
    "10",
    "9",
    "01",
    "x y",
    "toJSON",
  ];
  const random = (depth: number): unknown => {
    switch (next(depth > 3 ? 4 : 7)) {
      case 0:
        return next(2) === 0;
      case 1:
        return [0, -0, 1.5, -3e21, 2 ** 53][next(5)];
      case 2:
        return ["", "s", '"\\\n', "\udc00", "é😀"][next(5)];
      case 3:
        return null;
      case 4:
      case 5:
        return Array.from({ length: next(4) }, () => random(depth + 1));
      default: {
        const object: Record<string, unknown> = {};
        for (let i = next(5); i > 0; i--) {
          const value = next(8) === 0 ? undefined : random(depth + 1);
          Object.defineProperty(object, KEYS[next(KEYS.length)]!, {
            value,
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
        return object;
      }
    }
  };
  for (let i = 0; i < 5_000; i++) {
    const value = random(0);
    assert.equal(canonicalJson(value), reference(value), JSON.stringify(value));
  }
});

Deno.test("sha256Hex is the lowercase hex SHA-256 of the UTF-8 text", async () => {
  assert.equal(
    await sha256Hex(""),
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
  );
  assert.equal(
    await sha256Hex("abc"),
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
});

Deno.test("the arguments hash ignores key order and treats no arguments as {}", async () => {
  const a = await argumentsHash({ path: "/x", opts: { force: true, depth: 2 } });
  const b = await argumentsHash({ opts: { depth: 2, force: true }, path: "/x" });
  assert.equal(a, b);
  assert.match(a, /^[0-9a-f]{64}$/);
  assert.equal(await argumentsHash(undefined), await sha256Hex("{}"));
  assert.equal(await argumentsHash({}), await sha256Hex("{}"));
  assert.notEqual(await argumentsHash({ path: "/y" }), await argumentsHash({ path: "/x" }));
});

Deno.test("the arguments hash rejects (not throws) non-JSON arguments", async () => {
  const pending = argumentsHash({ bad: NaN });
  assert.ok(pending instanceof Promise);
  await assert.rejects(pending, TypeError);
});
