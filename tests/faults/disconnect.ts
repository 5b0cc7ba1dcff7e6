/**
 * Clients that go away: raw Streamable HTTP and legacy SSE sessions whose connection the test
 * aborts in the middle of a call or of its notification stream.
 * @module
 */
import assert from "node:assert/strict";
import { eventually } from "../support/fleet.ts";
import { initializeRequest, openSession, type TestGateway } from "../support/gateway.ts";
import type { Rig } from "./rig.ts";

/** A raw session whose connection can be cut. */
interface RawSession {
  /**
   * Sends a `tools/call`; `onText` gets the text of the stream its answer and notifications
   * arrive on, and the promise resolves when that stream ends or is cut.
   */
  call(name: string, args: Record<string, unknown>, onText: (text: string) => void): Promise<void>;
  /** Cuts the connection carrying the call's stream (the POST's, or the SSE GET's). */
  cut(): void;
  /** Ends what is left of the session. */
  close(): Promise<void>;
}

function callRequest(name: string, args: Record<string, unknown>) {
  return {
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: { name, arguments: args, _meta: { progressToken: "cut" } },
  };
}

/** A body being read; `cut()` drops the connection under it. */
interface Reading {
  /** Resolves when the body has ended or was cut. */
  done: Promise<void>;
  cut(): void;
}

/**
 * Reads a response body to its end or its cut, handing each chunk's text to `onText`. Cutting
 * both aborts the fetch and cancels the reader: an abort alone has let a busy body keep flowing.
 */
function readAll(
  response: Response,
  controller: AbortController,
  onText: (text: string) => void,
): Reading {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const done = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        onText(decoder.decode(value, { stream: true }));
      }
    } catch { /* cut */ }
  })();
  return {
    done,
    cut() {
      controller.abort();
      reader.cancel().catch(() => {});
    },
  };
}

/** Streamable HTTP: the call's POST carries its answer; cutting it drops that request. */
async function httpSession(gateway: TestGateway): Promise<RawSession> {
  const headers = await openSession(gateway);
  let reading: Reading | undefined;
  return {
    async call(name, args, onText) {
      const controller = new AbortController();
      const response = await fetch(`${gateway.url}/mcp`, {
        method: "POST",
        headers,
        body: JSON.stringify(callRequest(name, args)),
        signal: controller.signal,
      });
      assert.equal(response.status, 200);
      reading = readAll(response, controller, onText);
      await reading.done;
    },
    cut: () => reading?.cut(),
    async close() {
      const response = await fetch(`${gateway.url}/mcp`, { method: "DELETE", headers });
      await response.body?.cancel();
    },
  };
}

/** Legacy SSE: answers arrive on the GET stream; cutting it drops the GET. */
async function sseSession(gateway: TestGateway): Promise<RawSession> {
  const controller = new AbortController();
  const auth = { Authorization: `Bearer ${gateway.token}` };
  const response = await fetch(`${gateway.url}/sse`, {
    headers: { ...auth, Accept: "text/event-stream" },
    signal: controller.signal,
  });
  assert.equal(response.status, 200);
  let onText: (text: string) => void = () => {};
  const endpoint = Promise.withResolvers<string>();
  let seen = "";
  const reading = readAll(response, controller, (text) => {
    if (seen.length < 4096) seen += text;
    const found = /event: endpoint\ndata: (\S+)\n/.exec(seen)?.[1];
    if (found) endpoint.resolve(found);
    onText(text);
  });
  reading.done.then(() => endpoint.reject(new Error(`the SSE stream ended early: ${seen}`)));
  const url = new URL(await endpoint.promise, gateway.url);
  const post = async (message: unknown) => {
    const posted = await fetch(url, {
      method: "POST",
      headers: { ...auth, "Content-Type": "application/json" },
      body: JSON.stringify(message),
    });
    assert.equal(posted.status, 202);
    await posted.body?.cancel();
  };
  await post(initializeRequest("2024-11-05", 0));
  await post({ jsonrpc: "2.0", method: "notifications/initialized" });
  return {
    async call(name, args, listener) {
      onText = listener;
      await post(callRequest(name, args));
      await reading.done;
    },
    cut: () => reading.cut(),
    async close() {
      reading.cut();
      await reading.done;
    },
  };
}

function rawSession(rig: Rig): Promise<RawSession> {
  const gateway = rig.gateway;
  assert.ok(gateway, "raw sessions need the in-process gateway (HTTP or SSE inbound)");
  return rig.inbound === "sse" ? sseSession(gateway) : httpSession(gateway);
}

/** Counts the progress notifications in a stream's text, chunk by chunk. */
function progressCounter(onCount: (count: number) => void): (text: string) => void {
  let count = 0;
  let partial = "";
  return (text) => {
    const lines = (partial + text).split("\n");
    partial = lines.pop()!;
    count += lines.filter((line) => line.includes('"notifications/progress"')).length;
    onCount(count);
  };
}

/**
 * Starts `name` (a hanging tool) on a raw session, waits until the upstream has it (`running`
 * counts the upstream's calls), cuts the connection and ends the session.
 */
export async function abortMidCall(
  rig: Rig,
  name: string,
  running: () => Promise<number>,
): Promise<void> {
  const session = await rawSession(rig);
  try {
    const reading = session.call(name, {}, () => {});
    await eventually(async () => (await running()) >= 1, "the call to reach the upstream");
    session.cut();
    await reading;
    await othersAnswer(rig);
  } finally {
    await session.close();
  }
}

/** Starts `name` (a flooding tool), cuts the connection once notifications are streaming. */
export async function abortMidStream(
  rig: Rig,
  name: string,
  args: Record<string, unknown>,
): Promise<void> {
  const session = await rawSession(rig);
  try {
    const streaming = Promise.withResolvers<void>();
    let seen = 0;
    const reading = session.call(
      name,
      args,
      progressCounter((count) => {
        seen = count;
        if (count >= 10) streaming.resolve();
      }),
    );
    await Promise.race([streaming.promise, reading]);
    assert.ok(seen >= 10, `notifications were streaming when the connection was cut (${seen})`);
    session.cut();
    await reading;
    await othersAnswer(rig);
  } finally {
    await session.close();
  }
}

/** A session opened after the cut, and the rig's own, both still answer. */
async function othersAnswer(rig: Rig): Promise<void> {
  const fresh = await rig.openClient!();
  try {
    const result = await fresh.callTool({ name: "system_status", arguments: {} });
    assert.ok(!result.isError);
  } finally {
    await fresh.close();
  }
}
