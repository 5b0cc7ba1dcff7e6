import assert from "node:assert/strict";
import { responseId } from "./relay.ts";

Deno.test("responseId finds the id of a response serialized with the id last (the SDK's order)", () => {
  const preview = '{"result":{"content":[{"type":"text","text":"xxxxxxxx';
  assert.equal(responseId(preview, 'xxxxxx"}]},"jsonrpc":"2.0","id":"a33-7"}'), "a33-7");
  assert.equal(responseId(preview, 'xxxx"}]},"jsonrpc":"2.0","id":12}'), 12);
});

Deno.test("responseId finds an id serialized first", () => {
  assert.equal(responseId('{"jsonrpc":"2.0","id":5,"result":{"content":[', "xxxx"), 5);
  assert.equal(responseId('{"id":"x","result":{', "xxxx"), "x");
});

Deno.test("responseId never takes an id from inside content or from a request of the upstream", () => {
  // An escaped "id" inside a text value, and a nested object's id before the top-level one.
  const preview = '{"result":{"content":[{"type":"text","text":"{\\"id\\":99}';
  assert.equal(responseId(preview, 'xx"}]},"jsonrpc":"2.0","id":3}'), 3);
  assert.equal(responseId(preview, 'xxxx {\\"id\\":99} xxxx'), undefined);
  // A request from the upstream (sampling) is not an answer to one of ours.
  assert.equal(
    responseId('{"method":"sampling/createMessage","params":{', '},"jsonrpc":"2.0","id":4}'),
    undefined,
  );
});
