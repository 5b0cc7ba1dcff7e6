import assert from "node:assert/strict";
import { privateAddressOf } from "./private_address.ts";

Deno.test("privateAddressOf names loopback, link-local and private hosts, in every spelling", () => {
  const cases: [string, string, string][] = [
    ["http://127.0.0.1:8080/mcp", "127.0.0.1", "loopback"],
    ["http://0x7f.1/mcp", "127.0.0.1", "loopback"],
    ["http://2130706433/mcp", "127.0.0.1", "loopback"],
    ["http://017700000001/mcp", "127.0.0.1", "loopback"],
    ["http://[::1]/mcp", "[::1]", "loopback"],
    ["http://[::ffff:127.0.0.1]/mcp", "[::ffff:7f00:1]", "loopback"],
    ["http://169.254.169.254/latest/meta-data", "169.254.169.254", "link-local"],
    ["http://10.1.2.3/", "10.1.2.3", "private"],
    ["http://172.31.255.255/", "172.31.255.255", "private"],
    ["http://192.168.0.10/", "192.168.0.10", "private"],
    ["http://[fd12:3456::1]/", "[fd12:3456::1]", "unique-local"],
    ["http://[fe80::1]/", "[fe80::1]", "link-local"],
    ["http://0.0.0.0:3000/", "0.0.0.0", "this-network"],
    ["http://LOCALHOST./mcp", "localhost", "loopback"],
    ["http://api.localhost/mcp", "api.localhost", "loopback"],
  ];
  for (const [url, host, kind] of cases) {
    const found = privateAddressOf(url);
    assert.equal(found?.host, host, url);
    assert.ok(found?.kind.includes(kind), `${url}: ${found?.kind}`);
  }
});

Deno.test("privateAddressOf leaves public addresses and names alone", () => {
  for (
    const url of [
      "https://mcp.example.com/mcp",
      "http://172.32.0.1/",
      "http://192.169.0.1/",
      "http://8.8.8.8/",
      "http://[2001:db8::1]/",
      "http://[::ffff:8.8.8.8]/",
    ]
  ) {
    assert.equal(privateAddressOf(url), undefined, url);
  }
});
