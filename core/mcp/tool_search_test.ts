import assert from "node:assert/strict";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { tokenize, ToolSearchIndex } from "./tool_search.ts";

const tool = (name: string, description: string, params: string[] = []): Tool => ({
  name,
  description,
  inputSchema: {
    type: "object",
    properties: Object.fromEntries(params.map((p) => [p, { type: "string" }])),
  },
});

Deno.test("tokenize splits snake, kebab and camel case names and drops stop words", () => {
  assert.deepEqual(tokenize("github__create_issue"), ["github", "create", "issue"]);
  assert.deepEqual(tokenize("get-tiny-image"), ["get", "tiny", "image"]);
  assert.deepEqual(tokenize("listPullRequests"), ["list", "pull", "request"]);
  assert.deepEqual(tokenize("Add the numbers to a list"), ["add", "number", "list"]);
});

Deno.test("ToolSearchIndex ranks a name match above a passing mention in a description", () => {
  const index = new ToolSearchIndex([
    tool("fs__read_file", "Reads a file from disk", ["path"]),
    tool("fs__write_file", "Writes a file; you can read it back with read_file", [
      "path",
      "content",
    ]),
    tool("github__create_issue", "Opens an issue", ["title", "body"]),
  ]);
  assert.deepEqual(index.search("read a file", 3).map((r) => r.tool.name), [
    "fs__read_file",
    "fs__write_file",
  ]);
  assert.equal(index.search("open a new issue", 1)[0]?.tool.name, "github__create_issue");
});

Deno.test("ToolSearchIndex uses parameter names", () => {
  const index = new ToolSearchIndex([
    tool("a__one", "Does a thing", ["latitude", "longitude"]),
    tool("b__two", "Does another thing", ["query"]),
  ]);
  assert.equal(index.search("latitude", 1)[0]?.tool.name, "a__one");
});

Deno.test("ToolSearchIndex returns nothing for a query that matches no word, and at most k", () => {
  const index = new ToolSearchIndex([tool("x__a", "alpha"), tool("x__b", "alpha beta")]);
  assert.deepEqual(index.search("zeta", 5), []);
  assert.equal(index.search("alpha", 1).length, 1);
});
