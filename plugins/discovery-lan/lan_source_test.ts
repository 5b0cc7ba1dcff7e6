import assert from "node:assert/strict";
import { candidatesFromRecords, SERVICE } from "./lan_source.ts";

Deno.test("An mDNS answer becomes a candidate from its SRV port, TXT path and transport, and A address", () => {
  const txt = [new TextEncoder().encode("path=sse"), new TextEncoder().encode("transport=sse")];
  const found = candidatesFromRecords([
    { name: SERVICE, type: "PTR", data: `notes.${SERVICE}` },
    { name: `notes.${SERVICE}`, type: "SRV", data: { port: 8931, target: "notes-box.local" } },
    { name: `notes.${SERVICE}`, type: "TXT", data: txt },
    { name: "notes-box.local", type: "A", data: "192.168.1.20" },
    { name: SERVICE, type: "PTR", data: `no-srv.${SERVICE}` },
  ]);
  assert.deepEqual(found, [{
    id: "notes",
    source: "lan",
    transport: "sse",
    url: "http://192.168.1.20:8931/sse",
    labels: { host: "notes-box.local" },
  }]);
});
