import assert from "node:assert/strict";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { MemorySharedState } from "../../core/bus/memory_shared_state.ts";
import { silentLogger } from "../../core/support/logger.ts";
import { principalOf, systemClock, type TokenPayload } from "../../core/plugin_api/mod.ts";
import { SharedSessions } from "../../core/mcp/shared_sessions.ts";
import { newSessionRecord } from "../../core/mcp/session_record.ts";
import { SharedCopies, type SharedCopy } from "./shared_copies.ts";
import { openStreamCount, releaseJsonStreams } from "./json_stream_release.ts";

const alice: TokenPayload = {
  tenant: "acme",
  subject: "alice",
  principal: principalOf("tokens_file", "alice"),
  scopes: ["mcp"],
};
const capabilities = { sampling: {}, roots: { listChanged: true } };
const clientInfo = { name: "probe", version: "2.0.0" };

/** Two replicas' SharedCopies over one shared state, and a session "s1" opened on the first. */
async function replicas() {
  const state = new MemorySharedState();
  const open = async (replicaId: string) =>
    new SharedCopies(
      await SharedSessions.open(state, {
        ttlMs: 60_000,
        replicaId,
        clock: systemClock,
        logger: silentLogger,
      }),
      silentLogger,
    );
  const a = await open("a");
  const b = await open("b");
  await a.store.create(
    "s1",
    newSessionRecord({
      params: { protocolVersion: "2025-06-18", capabilities, clientInfo },
      tenant: "acme",
      subject: "alice",
      principal: alice.principal,
      replica: "a",
      now: 0,
    }),
  );
  const close = () => {
    a.store.close();
    b.store.close();
  };
  return { a, b, close };
}

/** A copy on `copies` whose transport records what reaches its GET stream. */
function copy(copies: SharedCopies): SharedCopy & { written: JSONRPCMessage[] } {
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => "s1",
  });
  const written: JSONRPCMessage[] = [];
  transport.sessionId = "s1";
  const write = (message: JSONRPCMessage) => (written.push(message), Promise.resolve());
  const made = {
    transport,
    owner: alice,
    streams: 0,
    inFlight: new Set<string | number>(),
    written,
  };
  // The relay stage as the session pipeline composes it, in front of the recording send.
  const relay = copies.relay(made);
  relay.attach?.({ receive: () => {}, send: write });
  transport.send = (message, options) => relay.send!(message, options, write);
  return made;
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("a rebuilt copy's SDK server has the client's stored capabilities, under the stored id", async () => {
  const { b, close } = await replicas();
  const record = await b.lookup("s1", alice, undefined);
  assert.ok(!(record instanceof Response));
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => "s1",
  });
  const server = new Server({ name: "gw", version: "1" }, { capabilities: { tools: {} } });
  await server.connect(transport);
  let initialized = false;
  server.oninitialized = () => initialized = true;
  assert.equal(await b.initialize(transport, "s1", record, "http://b/mcp"), true);
  assert.equal(transport.sessionId, "s1");
  assert.deepEqual(server.getClientCapabilities(), capabilities);
  assert.deepEqual(server.getClientVersion(), clientInfo);
  assert.ok(initialized, "notifications/initialized reached the server");
  const ping = await transport.handleRequest(
    new Request("http://b/mcp", {
      method: "POST",
      headers: {
        accept: "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-session-id": "s1",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    }),
  );
  assert.match(await ping.text(), /"result":\{\}/, "the real request is served after it");
  await server.close();
  close();
});

Deno.test("in JSON response mode a copy is rebuilt the same way", async () => {
  const { b, close } = await replicas();
  const record = await b.lookup("s1", alice, undefined);
  assert.ok(!(record instanceof Response));
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => "s1",
    enableJsonResponse: true,
  });
  releaseJsonStreams(transport);
  const server = new Server({ name: "gw", version: "1" }, { capabilities: {} });
  await server.connect(transport);
  assert.equal(await b.initialize(transport, "s1", record, "http://b/mcp"), true);
  assert.deepEqual(server.getClientCapabilities(), capabilities);
  assert.equal(openStreamCount(transport), 0, "the discarded answer leaves no stream behind");
  await server.close();
  close();
});

Deno.test("another caller's valid session id is refused without building anything", async () => {
  const { b, close } = await replicas();
  const mallory: TokenPayload = {
    tenant: "globex",
    subject: "mallory",
    principal: principalOf("tokens_file", "mallory"),
    scopes: ["mcp"],
  };
  const refused = await b.lookup("s1", mallory, undefined);
  assert.ok(refused instanceof Response);
  assert.equal(refused.status, 403);
  const other = await b.lookup("s1", alice, "some-upstream");
  assert.ok(other instanceof Response);
  assert.equal(other.status, 404, "a /mcp session is not one of /mcp/<server_id>");
  assert.equal((await b.lookup("s2", alice, undefined) as Response).status, 404);
  close();
});

Deno.test("on another replica, a JWT whose sub names the session's opener is refused, and an older replica's record is gone for everyone (404: its client initializes again)", async () => {
  const { a, b, close } = await replicas();
  const namesake: TokenPayload = {
    ...alice,
    principal: principalOf("jwt", "keys", "https://idp.example", "alice"),
    kind: "jwt",
  };
  const refused = await b.lookup("s1", namesake, undefined);
  assert.ok(refused instanceof Response);
  assert.equal(refused.status, 403);
  assert.ok(
    !((await b.lookup("s1", alice, undefined)) instanceof Response),
    "its opener is served",
  );

  // A record written before records carried a principal: nobody can prove to be its opener.
  const { principal: _, ...old } = newSessionRecord({
    params: { protocolVersion: "2025-06-18", capabilities, clientInfo },
    tenant: "acme",
    subject: "alice",
    principal: alice.principal,
    replica: "a",
    now: 0,
  });
  await a.store.create("s-old", old);
  const legacy = await b.lookup("s-old", alice, undefined);
  assert.ok(legacy instanceof Response);
  // 404, not 403: the session is gone for everyone, and its client initializes again (MCP).
  assert.equal(legacy.status, 404);
  close();
});

Deno.test("list_changed outside a request is left to the replica holding the GET stream", async () => {
  const { a, close } = await replicas();
  const published: string[] = [];
  const stop = a.store.subscribe("s1", (m) => published.push("method" in m ? m.method : ""));
  const here = copy(a);
  await here.transport.send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
  await tick();
  assert.deepEqual(here.written, [], "no GET stream here: not written");
  assert.deepEqual(published, [], "and not relayed: the holder emits its own");
  here.streams = 1;
  await here.transport.send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
  assert.equal(here.written.length, 1, "with the GET stream here it is written");
  stop();
  close();
});

Deno.test("a notification outside a request reaches the GET stream on another replica, once", async () => {
  const { a, b, close } = await replicas();
  const origin = copy(a);
  const holder = copy(b);
  holder.streams = 1;
  b.attach(holder, () => {});
  const updated = {
    jsonrpc: "2.0" as const,
    method: "notifications/resources/updated",
    params: { uri: "x://1" },
  };
  await origin.transport.send(updated);
  await tick();
  assert.deepEqual(origin.written, []);
  assert.deepEqual(holder.written, [updated]);
  holder.streams = 0;
  await origin.transport.send(updated);
  await tick();
  assert.equal(holder.written.length, 1, "once the stream closed nothing more is written");
  holder.unsubscribe?.();
  close();
});

Deno.test("a request's own notifications stay on its POST's response", async () => {
  const { a, close } = await replicas();
  const published: string[] = [];
  const stop = a.store.subscribe("s1", (m) => published.push("method" in m ? m.method : ""));
  const here = copy(a);
  await here.transport.send(
    { jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: 1 } },
    { relatedRequestId: 7 },
  );
  await tick();
  assert.equal(here.written.length, 1);
  assert.deepEqual(published, []);
  stop();
  close();
});

Deno.test("a state change is written to the record and applied back to the copy", async () => {
  const { a, b, close } = await replicas();
  const restored: unknown[] = [];
  const here = copy(a);
  here.served = { close: () => Promise.resolve(), restore: (state) => void restored.push(state) };
  const hooks = a.hooks(here);
  await hooks.changed({ subscribed: "x://1" });
  await hooks.changed({ logLevel: "error" });
  assert.deepEqual((await b.store.load("s1"))?.subscriptions, [{ uri: "x://1", replica: "a" }]);
  assert.equal(b.stateOf((await b.store.load("s1"))!).subscriptions.length, 0, "b relays none");
  assert.deepEqual(restored.at(-1), {
    logLevel: "error",
    activations: [],
    subscriptions: ["x://1"],
  });
  assert.equal(a.holdsSubscriptions("s1"), true);
  await b.hooks(copy(b)).changed({ unsubscribed: "x://1" });
  await tick();
  assert.equal(a.holdsSubscriptions("s1"), false, "an unsubscribe on b releases a's copy");
  close();
});

Deno.test("the client's answer to a request another replica asked reaches that replica", async () => {
  const { a, b, close } = await replicas();
  const asker = copy(a);
  const received: JSONRPCMessage[] = [];
  a.attach(asker, (message) => received.push(message));
  await asker.transport.send(
    { jsonrpc: "2.0", id: 4, method: "sampling/createMessage", params: {} },
    { relatedRequestId: 9 },
  );
  const asked = asker.written[0] as { id: string };
  assert.equal(asked.id, "a33:a:4", "the request's id names the replica that asked");
  const elsewhere = copy(b);
  const answer = { jsonrpc: "2.0", id: asked.id, result: { role: "assistant" } };
  assert.equal(b.route(elsewhere, answer), undefined, "nothing left for replica b");
  await tick();
  assert.deepEqual(received, [{ ...answer, id: 4 }], "a gets it under its own id");
  assert.deepEqual(a.route(asker, answer), { ...answer, id: 4 }, "arriving at a, it stays");
  asker.unsubscribe?.();
  close();
});

Deno.test("a cancellation of a call running on another replica reaches that replica", async () => {
  const { a, b, close } = await replicas();
  const runner = copy(a);
  runner.inFlight.add(12);
  const received: JSONRPCMessage[] = [];
  a.attach(runner, (message) => received.push(message));
  const cancel = {
    jsonrpc: "2.0",
    method: "notifications/cancelled",
    params: { requestId: 12, reason: "user" },
  };
  assert.deepEqual(b.route(copy(b), cancel), cancel, "kept where it landed too (harmless)");
  await tick();
  assert.deepEqual(received, [cancel]);
  b.route(copy(b), { ...cancel, params: { requestId: 99 } });
  await tick();
  assert.equal(received.length, 1, "a call a does not run is not a's business");
  runner.unsubscribe?.();
  close();
});
