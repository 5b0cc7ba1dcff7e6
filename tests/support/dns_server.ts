/**
 * A DNS server on 127.0.0.1 (UDP, RFC 1035) answering A and AAAA queries from a fixed table, for
 * tests of what the gateway does with names an attacker controls: real DNS on the wire, asked by
 * `Deno.resolveDns` with this server as its name server. Unknown names get NXDOMAIN.
 * @module
 */
import dgram from "node:dgram";
import type { Buffer } from "node:buffer";
import { parseV6, type ResolveHost } from "../../core/support/private_address.ts";

/** A running server: its port, a resolver asking it, and how to stop it. */
export interface DnsServer {
  port: number;
  resolveHost: ResolveHost;
  close(): Promise<void>;
}

/** The address bytes of an IPv4 or IPv6 address (as the URL parser prints it). */
function addressBytes(address: string): number[] {
  if (!address.includes(":")) return address.split(".").map(Number);
  return (parseV6(address) ?? []).flatMap((g) => [g >> 8, g & 0xff]);
}

/** Starts a server answering `names` (a lower-case name → its addresses). */
export async function startDnsServer(names: Record<string, string[]>): Promise<DnsServer> {
  const socket = dgram.createSocket("udp4");
  socket.on("message", (query: Buffer, peer: { address: string; port: number }) => {
    // The question: labels from byte 12, then type and class.
    const labels: string[] = [];
    let at = 12;
    while (query[at]! !== 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]!).toString("latin1"));
      at += 1 + query[at]!;
    }
    const questionEnd = at + 5;
    const type = (query[at + 1]! << 8) | query[at + 2]!;
    const name = labels.join(".").toLowerCase();
    const known = names[name];
    const answers = (known ?? []).map(addressBytes)
      .filter((bytes) => bytes.length === (type === 28 ? 16 : type === 1 ? 4 : -1));
    const header = [
      query[0]!,
      query[1]!,
      0x81, // response, recursion desired
      known === undefined ? 0x83 : 0x80, // recursion available; NXDOMAIN when unknown
      0,
      1,
      0,
      answers.length,
      0,
      0,
      0,
      0,
    ];
    const records = answers.flatMap((bytes) => [
      0xc0,
      12, // the question's name
      type >> 8,
      type & 0xff,
      0,
      1, // class IN
      0,
      0,
      0,
      0, // TTL 0: never cached
      0,
      bytes.length,
      ...bytes,
    ]);
    const reply = new Uint8Array([...header, ...query.subarray(12, questionEnd), ...records]);
    socket.send(reply, peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  const port = socket.address().port;
  const resolveHost: ResolveHost = async (host, signal) => {
    const ask = (type: "A" | "AAAA") =>
      Deno.resolveDns(host, type, { nameServer: { ipAddr: "127.0.0.1", port }, signal })
        .catch(() => [] as string[]);
    return (await Promise.all([ask("A"), ask("AAAA")])).flat();
  };
  return {
    port,
    resolveHost,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
