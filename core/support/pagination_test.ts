import assert from "node:assert/strict";
import { GatewayError } from "./errors.ts";
import { paginate } from "./pagination.ts";

const LETTERS = ["a", "b", "c", "d", "e"] as const;

function isInvalidCursor(error: unknown): boolean {
  assert.ok(error instanceof GatewayError, `expected a GatewayError, got ${error}`);
  assert.equal(error.code, "invalid_cursor");
  assert.match(error.message, /pass back the nextCursor of the previous page unchanged/);
  return true;
}

Deno.test("paginate returns the first page and a cursor when there is no cursor", () => {
  const page = paginate(LETTERS, undefined, 2);
  assert.deepEqual(page.items, ["a", "b"]);
  assert.equal(typeof page.nextCursor, "string");
});

Deno.test("paginate walks every item in order, page by page", () => {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const page = paginate(LETTERS, cursor, 2);
    pages.push(page.items);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  assert.deepEqual(pages, [["a", "b"], ["c", "d"], ["e"]]);
});

Deno.test("paginate omits nextCursor on the last page", () => {
  const second = paginate(LETTERS, paginate(LETTERS, undefined, 3).nextCursor, 3);
  assert.deepEqual(second.items, ["d", "e"]);
  assert.ok(!("nextCursor" in second));
});

Deno.test("paginate ends without an empty page when the list is an exact multiple of the size", () => {
  const first = paginate(["a", "b", "c", "d"], undefined, 2);
  const second = paginate(["a", "b", "c", "d"], first.nextCursor, 2);
  assert.deepEqual(second.items, ["c", "d"]);
  assert.ok(!("nextCursor" in second));
});

Deno.test("paginate returns one page without a cursor when everything fits", () => {
  assert.deepEqual(paginate(LETTERS, undefined, 5), { items: [...LETTERS] });
  assert.deepEqual(paginate([], undefined, 5), { items: [] });
});

Deno.test("paginate rejects a garbage cursor with invalid_cursor", () => {
  assert.throws(() => paginate(LETTERS, "abc", 2), isInvalidCursor);
});

Deno.test("paginate rejects a cursor that is not base64 with invalid_cursor", () => {
  assert.throws(() => paginate(LETTERS, "%%% not base64 %%%", 2), isInvalidCursor);
});

Deno.test("paginate rejects a cursor with a negative offset with invalid_cursor", () => {
  const negative = btoa(JSON.stringify({ o: -2 }));
  assert.throws(() => paginate(LETTERS, negative, 2), isInvalidCursor);
});

Deno.test("paginate rejects a cursor whose offset is not an integer with invalid_cursor", () => {
  for (const o of [1.5, "2", null]) {
    assert.throws(() => paginate(LETTERS, btoa(JSON.stringify({ o })), 2), isInvalidCursor);
  }
  assert.throws(() => paginate(LETTERS, btoa("null"), 2), isInvalidCursor);
});
