import assert from "node:assert/strict";
import { encodeJson } from "../bus/shared_state.ts";
import {
  decodeSessionRecord,
  encodeSessionRecord,
  newSessionRecord,
  SESSION_RECORD_MAX_BYTES,
} from "./session_record.ts";

const opening = {
  params: {
    protocolVersion: "2025-06-18",
    capabilities: { sampling: {}, roots: { listChanged: true } },
    clientInfo: { name: "probe", version: "1.0.0" },
  },
  tenant: "acme",
  subject: "alice",
  principal: '["tokens_file","alice"]',
  replica: "r1",
  now: 5,
};

Deno.test("a session record keeps the client's initialize parameters and its opener", () => {
  const record = newSessionRecord(opening);
  const decoded = decodeSessionRecord(encodeSessionRecord(record));
  assert.ok("record" in decoded);
  assert.deepEqual(decoded.record, {
    v: 1,
    protocolVersion: "2025-06-18",
    capabilities: { sampling: {}, roots: { listChanged: true } },
    clientInfo: { name: "probe", version: "1.0.0" },
    tenant: "acme",
    subject: "alice",
    principal: '["tokens_file","alice"]',
    activations: [],
    subscriptions: [],
    openedBy: "r1",
    openedAt: 5,
  });
});

Deno.test("an older replica's record without a principal still decodes, with no principal to match", () => {
  const { principal: _, ...old } = newSessionRecord(opening);
  const decoded = decodeSessionRecord(encodeJson(old));
  assert.ok("record" in decoded);
  assert.equal(decoded.record.principal, undefined);
});

Deno.test("initialize parameters too large for a record are refused with the bound named", () => {
  const huge = { experimental: { blob: "x".repeat(SESSION_RECORD_MAX_BYTES) } };
  assert.throws(
    () => newSessionRecord({ ...opening, params: { ...opening.params, capabilities: huge } }),
    /over the 65536 a shared session may hold/,
  );
});

Deno.test("initialize parameters of the wrong shape do not make a record", () => {
  assert.throws(
    () => newSessionRecord({ ...opening, params: { ...opening.params, clientInfo: "probe" } }),
    /do not fit a shared session record/,
  );
});

Deno.test("a stored record that is not JSON, oversized or of the wrong shape is unusable", () => {
  const good = newSessionRecord(opening);
  const bad = [
    new TextEncoder().encode("{not json"),
    new Uint8Array(SESSION_RECORD_MAX_BYTES + 1),
    encodeJson({ ...good, v: 2 }),
    encodeJson({ ...good, tenant: "" }),
    encodeJson({ ...good, logLevel: "loud" }),
    encodeJson({ ...good, activations: Array.from({ length: 300 }, (_, i) => `t${i}`) }),
  ];
  for (const bytes of bad) assert.ok("error" in decodeSessionRecord(bytes));
});
