import assert from "node:assert/strict";
import { join } from "node:path";
import { parseDotenv, readDotenv } from "./dotenv.ts";
import { GatewayError } from "../support/errors.ts";

Deno.test("parseDotenv reads KEY=value lines", () => {
  assert.deepEqual(parseDotenv("A=1\nB_2=two words\n_C=x=y"), {
    A: "1",
    B_2: "two words",
    _C: "x=y",
  });
});

Deno.test("parseDotenv trims whitespace around keys and values", () => {
  assert.deepEqual(parseDotenv("  A =  1  \n\tB\t=\tb\t"), { A: "1", B: "b" });
});

Deno.test("parseDotenv reads an empty value as the empty string", () => {
  assert.deepEqual(parseDotenv("A=\nB=''\nC=\"\""), { A: "", B: "", C: "" });
});

Deno.test("parseDotenv skips comment lines and blank lines", () => {
  assert.deepEqual(parseDotenv("# a comment\n\n   \n  # indented comment\nA=1\n\n"), { A: "1" });
});

Deno.test("parseDotenv accepts CRLF line endings", () => {
  assert.deepEqual(parseDotenv("A=1\r\nB=2\r\n"), { A: "1", B: "2" });
});

Deno.test("parseDotenv ignores an export prefix", () => {
  assert.deepEqual(parseDotenv("export A=1\n  export   B=2"), { A: "1", B: "2" });
});

Deno.test('parseDotenv expands \\n, \\" and \\\\ escapes inside double quotes', () => {
  const env = parseDotenv(String.raw`A="line1\nline2"
B="say \"hi\""
C="C:\\new"`);
  assert.equal(env.A, "line1\nline2");
  assert.equal(env.B, `say "hi"`);
  assert.equal(env.C, String.raw`C:\new`);
});

Deno.test("parseDotenv keeps single-quoted values literal", () => {
  const env = parseDotenv(String.raw`A='a\nb # not a comment'`);
  assert.equal(env.A, String.raw`a\nb # not a comment`);
});

Deno.test("parseDotenv keeps a # inside double quotes", () => {
  assert.equal(parseDotenv(`A="a # b"`).A, "a # b");
});

Deno.test("parseDotenv ends an unquoted value at an inline comment", () => {
  assert.deepEqual(parseDotenv("A=value # explained\nB=a#b"), { A: "value", B: "a#b" });
});

Deno.test("parseDotenv strips the quotes of a quoted value followed by a comment", () => {
  assert.deepEqual(parseDotenv(`A="double" # note\nB='single' # note`), {
    A: "double",
    B: "single",
  });
});

Deno.test("parseDotenv rejects a malformed line with config_invalid naming file and line", () => {
  assert.throws(
    () => parseDotenv("A=1\n# fine\nnot a pair\n", "conf/.env"),
    (error: unknown) => {
      assert.ok(error instanceof GatewayError);
      assert.equal(error.code, "config_invalid");
      assert.match(error.message, /^conf\/\.env:3: expected KEY=value, found "not a pair"/);
      assert.deepEqual(error.data, { file: "conf/.env", line: 3 });
      return true;
    },
  );
});

Deno.test("parseDotenv rejects a key that is not a variable name", () => {
  assert.throws(
    () => parseDotenv("1A=x"),
    (error: unknown) =>
      error instanceof GatewayError && error.code === "config_invalid" &&
      error.message.startsWith(".env:1:"),
  );
});

Deno.test("readDotenv parses the file at the path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, ".env");
    await Deno.writeTextFile(path, "export A=1\nB='two'\n");
    assert.deepEqual(await readDotenv(path), { A: "1", B: "two" });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("readDotenv names the file path in a malformed-line error", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, ".env");
    await Deno.writeTextFile(path, "A=1\noops\n");
    await assert.rejects(
      () => readDotenv(path),
      (error: unknown) => error instanceof GatewayError && error.message.startsWith(`${path}:2:`),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("readDotenv returns an empty map for a missing file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    assert.deepEqual(await readDotenv(join(dir, "missing.env")), {});
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
