/**
 * Shutdown and restart with real processes: a gateway child on HTTP (or stdio) with a real
 * upstream whose tool is slow. SIGTERM drains calls in flight within the grace, refuses new work,
 * exits 0 and leaves no descendant process; a call longer than the grace is cut off with a clear
 * error; a restart brings back the fleet the admin API changed and the approvals, and a token is
 * still good exactly once.
 */
import assert from "node:assert/strict";
import {
  FrameReader,
  type HttpChild,
  readyz,
  spawnHttpChild,
  spawnStdioGateway,
} from "../support/child_gateway.ts";
import { eventually, faultServer, fixture, writeFleet } from "../support/fleet.ts";
import { initializeRequest } from "../support/gateway.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const DENO_JSON = `${ROOT}deno.json`;
const TOKEN = "shutdown-test-token";
/** The operator's token: the admin API and approvals (the client token holds scope mcp only). */
const ADMIN_TOKEN = "shutdown-test-admin-token";
const APPROVAL_SECRET = "an-approval-secret-for-the-restart-test-0123456789";
const META = "agent33/approval_token";

/**
 * The fault fixture with no fault (its `slow` tool sleeps `ms`), as a fleet entry; `marker`, an
 * argument it ignores, makes its processes findable in /proc after the gateway has gone.
 */
function slowServer(id: string, marker = "agent33-shutdown-test"): string {
  return faultServer(id, { args: [marker] });
}

/** The gateway on HTTP as a child, with this file's token, answering POSTs as JSON. */
function spawnHttpGateway(env: Record<string, string>, until?: RegExp): Promise<HttpChild> {
  return spawnHttpChild(
    {
      MCP_SERVER_AUTH_TOKEN: TOKEN,
      MCP_ADMIN_TOKEN: ADMIN_TOKEN,
      MCP_HTTP_RESPONSE_MODE: "json",
      ...env,
    },
    until,
  );
}

/** Opens a Streamable HTTP session (JSON response mode); returns the headers for its requests. */
async function openSession(url: string): Promise<Record<string, string>> {
  const headers = {
    Authorization: `Bearer ${TOKEN}`,
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
  };
  const opened = await fetch(`${url}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify(initializeRequest("2025-11-25")),
  });
  const session = opened.headers.get("mcp-session-id");
  await opened.body?.cancel();
  assert.ok(session, `initialize answered ${opened.status} without a session`);
  const withSession = {
    ...headers,
    "Mcp-Session-Id": session,
    "Mcp-Protocol-Version": "2025-11-25",
  };
  const initialized = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: withSession,
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  await initialized.body?.cancel();
  return withSession;
}

// deno-lint-ignore no-explicit-any
type Rpc = { status: number; headers: Headers; body: any };

let nextId = 1;

/** One tools/call on a session; the JSON-RPC answer (or the HTTP refusal) with its status. */
async function callTool(
  url: string,
  session: Record<string, string>,
  name: string,
  args: Record<string, unknown>,
  meta?: Record<string, unknown>,
): Promise<Rpc> {
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: session,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: nextId++,
      method: "tools/call",
      params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) },
    }),
  });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

async function admin(url: string, method: string, path: string, body?: unknown): Promise<Rpc> {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${ADMIN_TOKEN}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

/** Every process below `root` (Linux /proc), found through parent ids. */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry.name));
      children.set(ppid, list);
    } catch {
      // Gone while we looked.
    }
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** Live processes whose command line holds `marker`. */
function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const cmdline = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`);
      if (cmdline.includes(marker) && alive(Number(entry.name))) found.push(Number(entry.name));
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}

/** Whether a process exists and is not a zombie. */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return false;
  }
}

async function withFleet(
  yaml: string,
  fn: (fleet: { dir: string; path: string }) => Promise<void>,
): Promise<void> {
  const fleet = await writeFleet(yaml);
  try {
    await fn(fleet);
  } finally {
    await fleet.remove();
  }
}

Deno.test("SIGTERM with three calls in flight: all three answer, new work is refused, exit 0 within the grace, no process left", async () => {
  await withFleet(`proxy_servers:${slowServer("slow")}`, async (fleet) => {
    const gateway = await spawnHttpGateway({
      MCP_PROXY_CONFIG_PATH: fleet.path,
      MCP_SHUTDOWN_GRACE_MS: "10000",
    });
    try {
      const session = await openSession(gateway.url);
      const upstreams = descendants(gateway.pid);
      assert.ok(upstreams.length > 0, "the upstream runs as a child process");
      const calls = [1, 2, 3].map(() => callTool(gateway.url, session, "slow__slow", { ms: 1500 }));
      await eventually(
        async () => (await readyz(gateway.url)).body.toolCallsInFlight === 3,
        "three calls in flight",
      );
      const sent = performance.now();
      gateway.signal("SIGTERM");

      await eventually(
        async () => (await readyz(gateway.url)).body.status === "stopping",
        "/readyz to say stopping",
        5_000,
      );
      const refused = await fetch(`${gateway.url}/mcp`, {
        method: "POST",
        headers: { ...session, "Mcp-Session-Id": "" },
        body: JSON.stringify(initializeRequest("2025-11-25")),
      });
      assert.equal(refused.status, 503);
      assert.equal(refused.headers.get("connection"), "close");
      assert.ok(Number(refused.headers.get("retry-after")) > 0);
      assert.equal((await refused.json()).error.code, "shutting_down");
      const late = await callTool(gateway.url, session, "slow__slow", { ms: 1 });
      assert.equal(late.status, 503, "a new call on an open session is refused too");
      assert.equal(late.body.error.code, "shutting_down");

      for (const answer of await Promise.all(calls)) {
        assert.equal(answer.status, 200);
        assert.deepEqual(answer.body.result?.content, [{ type: "text", text: "slept 1500" }]);
      }
      const status = await gateway.status;
      const took = performance.now() - sent;
      assert.equal(status.code, 0, gateway.log());
      assert.ok(took < 10_000, `exited ${Math.round(took)} ms after SIGTERM`);
      assert.match(gateway.log(), /waiting up to 10000 ms for 3 tool call\(s\) in flight/);
      assert.match(gateway.log(), /all 3 tool call\(s\) in flight finished/);
      await eventually(() => upstreams.every((pid) => !alive(pid)), "no process left", 5_000);
    } finally {
      await gateway.close();
    }
  });
});

Deno.test("SIGTERM while a request's body is still arriving: the request was taken before the stop, so it is served, not refused", async () => {
  await withFleet(`proxy_servers:${slowServer("slow")}`, async (fleet) => {
    const gateway = await spawnHttpGateway({
      MCP_PROXY_CONFIG_PATH: fleet.path,
      MCP_SHUTDOWN_GRACE_MS: "10000",
    });
    try {
      const session = await openSession(gateway.url);
      const body = new TextEncoder().encode(JSON.stringify({
        jsonrpc: "2.0",
        id: nextId++,
        method: "tools/call",
        params: { name: "slow__slow", arguments: { ms: 300 } },
      }));
      const half = Math.floor(body.length / 2);
      const { promise: rest, resolve: sendRest } = Promise.withResolvers<void>();
      const trickled = fetch(`${gateway.url}/mcp`, {
        method: "POST",
        headers: { ...session, "Content-Length": String(body.length) },
        body: new ReadableStream<Uint8Array>({
          async start(controller) {
            controller.enqueue(body.slice(0, half));
            await rest;
            controller.enqueue(body.slice(half));
            controller.close();
          },
        }),
      });
      // The request's head and half its body are on the wire before the signal.
      await new Promise((resolve) => setTimeout(resolve, 300));
      gateway.signal("SIGTERM");
      await eventually(
        async () => (await readyz(gateway.url)).body.status === "stopping",
        "/readyz to say stopping",
        5_000,
      );
      sendRest();
      const answer = await trickled;
      const rpc = await answer.json();
      assert.equal(answer.status, 200, JSON.stringify(rpc));
      assert.deepEqual(
        rpc.result?.content,
        [{ type: "text", text: "slept 300" }],
        JSON.stringify(rpc),
      );
      assert.equal((await gateway.status).code, 0, gateway.log());
      assert.match(gateway.log(), /1 HTTP request\(s\) taken before the stop/);
    } finally {
      await gateway.close();
    }
  });
});

Deno.test("A call longer than the grace is cut off with a clear error and the gateway still exits 0; a second SIGTERM stops at once", async () => {
  await withFleet(`proxy_servers:${slowServer("slow")}`, async (fleet) => {
    const gateway = await spawnHttpGateway({
      MCP_PROXY_CONFIG_PATH: fleet.path,
      MCP_SHUTDOWN_GRACE_MS: "1000",
    });
    try {
      const session = await openSession(gateway.url);
      const upstreams = descendants(gateway.pid);
      const call = callTool(gateway.url, session, "slow__slow", { ms: 60_000 });
      await eventually(
        async () => (await readyz(gateway.url)).body.toolCallsInFlight === 1,
        "the call in flight",
      );
      const sent = performance.now();
      gateway.signal("SIGTERM");
      const answer = await call;
      assert.equal(answer.body.error?.data?.code, "shutting_down", JSON.stringify(answer.body));
      assert.match(answer.body.error.message, /1000 ms grace, MCP_SHUTDOWN_GRACE_MS/);
      assert.match(answer.body.error.message, /check before retrying/);
      assert.equal((await gateway.status).code, 0, gateway.log());
      assert.ok(performance.now() - sent < 8_000, "the exit does not wait for the call");
      assert.match(gateway.log(), /0 tool call\(s\) finished, 1 cut off \(grace of 1000 ms\)/);
      await eventually(() => upstreams.every((pid) => !alive(pid)), "no process left", 5_000);
    } finally {
      await gateway.close();
    }

    const patient = await spawnHttpGateway({
      MCP_PROXY_CONFIG_PATH: fleet.path,
      MCP_SHUTDOWN_GRACE_MS: "600000",
    });
    try {
      const session = await openSession(patient.url);
      const call = callTool(patient.url, session, "slow__slow", { ms: 60_000 });
      await eventually(
        async () => (await readyz(patient.url)).body.toolCallsInFlight === 1,
        "the call in flight",
      );
      patient.signal("SIGTERM");
      await eventually(() => /waiting up to 600000 ms/.test(patient.log()), "the drain");
      const second = performance.now();
      patient.signal("SIGTERM");
      const answer = await call;
      assert.equal(answer.body.error?.data?.code, "shutting_down");
      assert.match(answer.body.error.message, /stopped at once by a second signal/);
      assert.equal((await patient.status).code, 0, patient.log());
      assert.ok(performance.now() - second < 8_000, "a second signal does not wait out the grace");
    } finally {
      await patient.close();
    }
  });
});

Deno.test("stdio: SIGTERM answers the call in flight, refuses a new request with shutting_down, and exits 0", async () => {
  await withFleet(`proxy_servers:${slowServer("slow")}`, async (fleet) => {
    const gateway = spawnStdioGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
    const frames = new FrameReader(gateway.stdout);
    const writer = gateway.stdin.getWriter();
    const send = (message: unknown) =>
      writer.write(new TextEncoder().encode(JSON.stringify(message) + "\n"));
    try {
      await send(initializeRequest("2025-11-25", 0));
      assert.ok((await frames.next()).result);
      await send({ jsonrpc: "2.0", method: "notifications/initialized" });
      // Upstreams start in the background: wait for the tool to be listed.
      let listed = false;
      for (let id = 100; !listed; id++) {
        await send({ jsonrpc: "2.0", id, method: "tools/list" });
        let frame = await frames.next();
        while (frame.id !== id) frame = await frames.next(); // notifications meanwhile
        listed = JSON.stringify(frame).includes("slow__slow");
        if (!listed) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      await send({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "slow__slow", arguments: { ms: 1500 } },
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      gateway.process.kill("SIGTERM");
      // Until the signal lands requests are served; from then on they are refused.
      let refused: { error?: { message: string; data: { code: string } } } | undefined;
      let done: { result?: { content: unknown } } | undefined;
      for (let id = 200; refused === undefined; id++) {
        await send({ jsonrpc: "2.0", id, method: "tools/list" });
        for (;;) {
          const frame = await frames.next();
          if (frame.id === 1) done = frame;
          if (frame.id !== id) continue;
          if (frame.error) refused = frame;
          break;
        }
        if (refused === undefined) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.equal(refused.error?.data.code, "shutting_down");
      assert.match(refused.error!.message, /shutting down/);
      while (done === undefined) {
        const frame = await frames.next();
        if (frame.id === 1) done = frame;
      }
      assert.deepEqual(done.result?.content, [{ type: "text", text: "slept 1500" }]);
      await frames.cancel();
      writer.releaseLock();
      const status = await gateway.close();
      assert.equal(status.code, 0, await gateway.stderr);
    } finally {
      await gateway.close();
    }
  });
});

Deno.test("A SIGTERM that lands while the gateway is still starting stops it cleanly once started (exit 0, not killed)", async () => {
  const marker = `agent33-start-${crypto.randomUUID()}`;
  await withFleet(`proxy_servers:${slowServer("slow", marker)}`, async (fleet) => {
    // The approvals line is logged early in start(), before plugins, the fleet and the listener.
    const gateway = await spawnHttpGateway({ MCP_PROXY_CONFIG_PATH: fleet.path }, /approvals from/);
    try {
      gateway.signal("SIGTERM");
      const status = await gateway.status;
      assert.equal(
        status.code,
        0,
        `exit ${status.code} (signal ${status.signal}):\n${gateway.log()}`,
      );
      assert.match(gateway.log(), /stopping/);
      await eventually(() => processesWith(marker).length === 0, "no upstream left", 5_000);
    } finally {
      await gateway.close();
    }
  });
});

const DESTRUCTIVE_POLICY = `
tenants:
  "*":
    effects:
      "slow__*": destructive
    approval: [destructive]
`;

Deno.test("A restart keeps the fleet the admin API changed and the approvals: a token approved before it works once after, a replay is refused", async () => {
  await withFleet(`proxy_servers:${slowServer("slow")}`, async (fleet) => {
    await Deno.writeTextFile(`${fleet.dir}/policy.yaml`, DESTRUCTIVE_POLICY);
    const env = {
      MCP_PROXY_CONFIG_PATH: fleet.path,
      MCP_POLICY_PATH: `${fleet.dir}/policy.yaml`,
      MCP_APPROVAL_SECRET: APPROVAL_SECRET,
    };
    const approve = async (url: string, session: Record<string, string>, ms: number) => {
      const refused = await callTool(url, session, "slow__slow", { ms });
      assert.equal(refused.body.error?.data?.code, "approval_required", JSON.stringify(refused));
      const id = refused.body.error.data.request.id as string;
      const approved = await admin(url, "POST", `/v1/approvals/${id}/approve`);
      assert.equal(approved.status, 200, JSON.stringify(approved.body));
      return { id, token: approved.body.token as string };
    };

    let first: { id: string; token: string };
    let used: { id: string; token: string };
    let waiting: string;
    const before = await spawnHttpGateway(env);
    try {
      const added = await admin(before.url, "POST", "/v1/mcp/proxy/servers", {
        id: "extra",
        command: ["deno", "run", "--config", DENO_JSON, fixture("upstreams/fault_server.ts")],
        sandbox: "deno",
        env: { FAULT: "none" },
        permissions: { env: ["FAULT"], read: true },
      });
      assert.equal(added.status, 201, JSON.stringify(added.body));
      const session = await openSession(before.url);
      first = await approve(before.url, session, 1);
      used = await approve(before.url, session, 2);
      const ok = await callTool(before.url, session, "slow__slow", { ms: 2 }, {
        [META]: used.token,
      });
      assert.deepEqual(ok.body.result?.content, [{ type: "text", text: "slept 2" }]);
      const pending = await callTool(before.url, session, "slow__slow", { ms: 3 });
      waiting = pending.body.error.data.request.id;
      before.signal("SIGTERM");
      assert.equal((await before.status).code, 0, before.log());
    } finally {
      await before.close();
    }
    const saved = JSON.parse(await Deno.readTextFile(`${fleet.path}.approvals.json`));
    assert.equal(saved.approvals.length, 3);
    assert.equal(saved.nonces.length, 1);

    const after = await spawnHttpGateway(env);
    try {
      const servers = await admin(after.url, "GET", "/v1/mcp/proxy/servers");
      assert.deepEqual(
        servers.body.servers.map((s: { id: string; state: string }) => [s.id, s.state]),
        [["slow", "READY"], ["extra", "READY"]],
      );
      assert.match(after.log(), /approvals from .*: 3 request\(s\) \(1 pending\), 1 redeemed/);
      const listed = await admin(after.url, "GET", "/v1/approvals?status=pending");
      assert.deepEqual(listed.body.approvals.map((a: { id: string }) => a.id), [waiting]);
      assert.equal(
        (await admin(after.url, "GET", `/v1/approvals/${first.id}`)).body.status,
        "approved",
      );

      const session = await openSession(after.url);
      const once = await callTool(after.url, session, "slow__slow", { ms: 1 }, {
        [META]: first.token,
      });
      assert.deepEqual(once.body.result?.content, [{ type: "text", text: "slept 1" }]);
      for (const [token, ms] of [[first.token, 1], [used.token, 2]] as const) {
        const replay = await callTool(after.url, session, "slow__slow", { ms }, { [META]: token });
        assert.equal(replay.body.error?.data?.code, "approval_replayed", JSON.stringify(replay));
      }
      after.signal("SIGTERM");
      assert.equal((await after.status).code, 0, after.log());
    } finally {
      await after.close();
    }
  });
});
