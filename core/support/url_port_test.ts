import assert from "node:assert/strict";
import { urlPort } from "./url_port.ts";

Deno.test("a URL's port is its own, else its scheme's default", () => {
  assert.deepEqual(
    [
      "https://a.example/mcp",
      "http://a.example/mcp",
      "https://a.example:8443/",
      "http://a.example:443/",
      "https://a.example:443/",
      "http://[::1]:9000/",
    ].map((u) => urlPort(new URL(u))),
    [443, 80, 8443, 443, 443, 9000],
  );
});
