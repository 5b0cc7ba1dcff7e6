import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { createLogger } from "../support/logger.ts";
import { EgressGuard } from "./egress_guard.ts";

const quiet = createLogger({ level: "error", sink: () => {} });

/** A SOCKS5 CONNECT to `host:port` through the guard, as Deno's socks5h client sends it: the reply code. */
async function socksConnect(guard: EgressGuard, host: string, port: number): Promise<number> {
  const conn = await Deno.connect({
    hostname: "127.0.0.1",
    port: Number(guard.address.split(":")[1]),
  });
  try {
    await conn.write(new Uint8Array([5, 1, 0]));
    const buf = new Uint8Array(10);
    await conn.read(buf);
    const name = new TextEncoder().encode(host);
    await conn.write(new Uint8Array([5, 1, 0, 3, name.length, ...name, port >> 8, port & 0xff]));
    let read = 0;
    while (read < 2) {
      const n = await conn.read(buf.subarray(read));
      if (n === null) break;
      read += n;
    }
    return buf[1]!;
  } finally {
    conn.close();
  }
}

Deno.test("the egress guard refuses a target no registry upstream uses, without looking it up", async () => {
  let lookups = 0;
  const guard = new EgressGuard({
    logger: quiet,
    resolve: () => (lookups++, Promise.resolve(["203.0.113.7"])),
  });
  try {
    guard.permit("mcp.example.test", 443);
    assert.equal(await socksConnect(guard, "other.example.test", 443), 2);
    assert.equal(await socksConnect(guard, "mcp.example.test", 8443), 2);
    assert.equal(lookups, 0);
  } finally {
    await guard.close();
  }
});

Deno.test("the egress guard judges an address literal as itself, and every address a name has", async () => {
  const guard = new EgressGuard({
    logger: quiet,
    resolve: (host) =>
      Promise.resolve(host === "split.test" ? ["203.0.113.7", "10.0.0.5"] : ["203.0.113.9"]),
  });
  try {
    assert.deepEqual(await guard.check("[::1]"), {
      refused: "::1, a loopback address, inside the gateway's own network",
      inside: true,
    });
    assert.deepEqual(await guard.check("169.254.169.254"), {
      refused:
        "169.254.169.254, a link-local address (where cloud metadata services answer), inside the gateway's own network",
      inside: true,
    });
    assert.deepEqual(await guard.check("split.test"), {
      refused:
        "split.test resolves to 10.0.0.5, a private address, inside the gateway's own network",
      inside: true,
    });
    assert.deepEqual(await guard.check("Public.Test."), { addresses: ["203.0.113.9"] });
  } finally {
    await guard.close();
  }
});

Deno.test("the egress guard refuses a name that does not resolve, or not within 3 s", async () => {
  const clock = new ManualClock();
  const guard = new EgressGuard({
    logger: quiet,
    clock,
    resolve: (host, signal) =>
      host === "slow.test"
        ? new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)))
        : Promise.resolve([]),
  });
  try {
    assert.deepEqual(await guard.check("nx.test"), {
      refused: "nx.test does not resolve",
      inside: false,
    });
    const slow = guard.check("slow.test");
    clock.advance(3000);
    assert.deepEqual(await slow, {
      refused: "slow.test could not be looked up within 3000 ms",
      inside: false,
    });
  } finally {
    await guard.close();
  }
});
