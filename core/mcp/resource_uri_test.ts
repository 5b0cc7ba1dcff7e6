import assert from "node:assert/strict";
import { resolvedUriProblem } from "./resource_uri.ts";

Deno.test("a resource URI is used only as its server will resolve it", () => {
  for (
    const same of [
      "notes://x/secret",
      "https://a.example",
      "https://a.example/mcp?q=1",
      "file:///etc/hosts",
      "not a url",
      "test://static/resource/1",
    ]
  ) {
    assert.equal(resolvedUriProblem(same), undefined, same);
  }
  for (
    const other of [
      "notes://x/public/../secret",
      "notes://x/%2e/secret",
      "notes://x/.%2E/secret",
      "NOTES://x/secret",
      "notes://x/sec\tret",
      "file:///etc/./passwd",
    ]
  ) {
    assert.match(resolvedUriProblem(other) ?? "", /resolves to "/, other);
  }
});
