import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import {
  privateAddressOf,
  privateIpKind,
  privateNamesOf,
  RESOLVE_CONCURRENCY,
  RESOLVE_MS,
} from "./private_address.ts";

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

Deno.test("An address as a resolver prints it is judged as its literal would be", () => {
  assert.equal(
    privateIpKind("169.254.169.254"),
    "a link-local address (where cloud metadata services answer)",
  );
  assert.equal(privateIpKind("10.1.2.3"), "a private address");
  assert.equal(privateIpKind("fd00::7"), "a unique-local address");
  assert.equal(privateIpKind("::ffff:127.0.0.1"), "a loopback address");
  assert.equal(privateIpKind("93.184.216.34"), undefined);
  assert.equal(privateIpKind("2606:2800:220:1:248:1893:25c8:1946"), undefined);
});

Deno.test("A name whose lookup does not finish within the bound is refused as unchecked, after the bound", async () => {
  const clock = new ManualClock();
  const looked: string[] = [];
  const pending = privateNamesOf(
    ["https://slow.example.test/mcp", "http://10.0.0.1/mcp", "https://slow.example.test/other"],
    (host) => {
      looked.push(host);
      return new Promise(() => {});
    },
    clock,
  );
  clock.advance(RESOLVE_MS);
  assert.deepEqual([...(await pending)], [[
    "slow.example.test",
    `could not be looked up within ${RESOLVE_MS} ms, so it may point inside the gateway's own network`,
  ]]);
  // Literals are judged without a lookup; each name is looked up once.
  assert.deepEqual(looked, ["slow.example.test"]);
});

Deno.test("A registry's many names are looked up a few at a time, every one of them", async () => {
  let inFlight = 0;
  let most = 0;
  const urls = Array.from({ length: 200 }, (_, i) => `https://n${i}.example.test/mcp`);
  const found = await privateNamesOf(urls, async (host) => {
    most = Math.max(most, ++inFlight);
    await new Promise((resolve) => setTimeout(resolve, 1));
    inFlight--;
    return host === "n150.example.test" ? ["10.9.8.7"] : ["93.184.216.34"];
  });
  assert.equal(most, RESOLVE_CONCURRENCY);
  assert.deepEqual([...found.keys()], ["n150.example.test"]);
  assert.match(found.get("n150.example.test")!, /^resolves to 10\.9\.8\.7, a private address/);
});
