/**
 * The fault matrix: every fault in {@link FAULTS} runs against each upstream transport (a stdio
 * child and a Streamable HTTP server, both real processes) behind one inbound transport per test
 * file. Each case names its rule; all of them also check that the gateway still answers, that the
 * other upstream keeps serving, and where the lifecycle and breaker states end.
 * @module
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as SdkClient } from "@modelcontextprotocol/sdk/client/index.js";
import { eventually } from "../support/fleet.ts";
import {
  assertError,
  BREAKER_THRESHOLD,
  BROKEN_FLEET,
  BROKEN_POLICY,
  call,
  CALL_MS,
  DEAD,
  eventsSince,
  expectError,
  expectText,
  type Inbound,
  POLICY,
  type Rig,
  SERVER,
  SLACK_MS,
  startRig,
  statusBecomes,
  type Upstream,
  UPSTREAMS,
} from "./rig.ts";
import { abortMidCall, abortMidStream } from "./disconnect.ts";
import { NEEDS_NATS } from "../support/nats_server.ts";

/** One fault and the rule the gateway must keep under it. */
export interface Fault {
  /** The rule, as the test name states it. */
  rule: string;
  /** Inbound transports it applies to; all by default. */
  inbounds?: readonly Inbound[];
  run(rig: Rig, upstream: Upstream): Promise<void>;
}

const other = (upstream: Upstream): Upstream => upstream === "stdio" ? "http" : "stdio";
const MB = 1024 * 1024;

/** The gateway answers, and the other upstream serves. */
async function othersServe(rig: Rig, upstream: Upstream): Promise<void> {
  await expectText(rig.client, `${SERVER[other(upstream)]}__ok`, "ok");
  const status = await call(rig.client, "system_status");
  assert.ok(status.text?.includes('"sessions"'), "the gateway's own tool answers");
}

/** The server is READY with its breaker CLOSED, and a call to it answers. */
async function healthy(rig: Rig, upstream: Upstream): Promise<void> {
  const id = SERVER[upstream];
  await expectText(rig.client, `${id}__ok`, "ok");
  await statusBecomes(
    rig,
    id,
    (s) => s.state === "READY" && s.breaker === "CLOSED",
    `"${id}" to be READY with its breaker CLOSED`,
  );
}

/** Calls until one answers: errors on the way must be clear and name the server. */
async function answersAgain(rig: Rig, name: string, server: string): Promise<string> {
  let text: string | undefined;
  await eventually(async () => {
    const outcome = await call(rig.client, name);
    if (outcome.error) {
      assertError(outcome, {
        server,
        code: ["upstream_error", "circuit_open", "timeout"],
        withinMs: CALL_MS + SLACK_MS,
      }, `${name} while the server recovers`);
      return false;
    }
    text = outcome.text;
    return true;
  }, `${name} to answer again`);
  return text!;
}

async function pidOf(rig: Rig, upstream: Upstream): Promise<number> {
  const outcome = await expectText(rig.client, `${SERVER[upstream]}__pid`, /^\d+$/);
  return Number(outcome.text);
}

/** Sends a signal to the upstream's process (`pid`, as its `pid` tool named it). */
function signalUpstream(rig: Rig, upstream: Upstream, pid: number, signal: Deno.Signal): void {
  if (upstream === "http") rig.httpUpstream.signal(signal);
  else Deno.kill(pid, signal);
}

/** Whether a process exists and is not a zombie (Linux). */
export function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/** The `inflight` count of the upstream, asked through the gateway. */
async function inflight(client: Client, upstream: Upstream): Promise<number> {
  const outcome = await expectText(client, `${SERVER[upstream]}__inflight`, /^\d+$/);
  return Number(outcome.text);
}

/** The HTTP fixture's `inflight`, asked directly (when no gateway is left to ask). */
export async function directInflight(url: string): Promise<number> {
  const client = new SdkClient({ name: "faults-direct", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  try {
    const result = await client.callTool({ name: "inflight", arguments: {} });
    return Number((result.content as { text: string }[])[0]?.text);
  } finally {
    await client.close();
  }
}

/** Asserts the upstream eventually has no call of ours left running. */
export async function noCallLeftUpstream(rig: Rig, upstream: Upstream, ms: number): Promise<void> {
  await eventually(
    async () => (await inflight(rig.client, upstream)) === 0,
    `"${SERVER[upstream]}" to have no call left running`,
    ms,
  );
}

/** The faults, in the order each file runs them. */
export const FAULTS: readonly Fault[] = [
  {
    rule:
      "a crash at start leaves the server FAILED with why, its tools hidden and its calls answering upstream_error naming it, while the others serve",
    async run(rig, upstream) {
      const dead = DEAD[upstream];
      const status = await rig.status(dead);
      assert.equal(status.state, "FAILED");
      assert.equal(status.breaker, "CLOSED", "a failed start is not a call failure");
      assert.match(status.lastError ?? "", /start failed/);
      if (upstream === "stdio") assert.match(status.lastError ?? "", /exit code 3/);
      const names = (await rig.client.listTools()).tools.map((t) => t.name);
      assert.ok(
        !names.some((n) => n.startsWith(`${dead}__`)),
        "a FAILED server's tools are hidden",
      );
      assert.ok(names.includes(`${SERVER[upstream]}__ok`));
      await expectError(rig.client, `${dead}__ok`, {
        server: dead,
        code: "upstream_error",
        message: /is FAILED.*start failed/,
        withinMs: SLACK_MS,
      });
      await healthy(rig, upstream);
      await othersServe(rig, upstream);
    },
  },
  {
    rule:
      "a crash mid-call answers upstream_error naming the server at once; it goes FAILED, is restarted to READY and its breaker ends CLOSED",
    async run(rig, upstream) {
      const id = SERVER[upstream];
      const mark = rig.events.length;
      const before = await pidOf(rig, upstream);
      await expectError(rig.client, `${id}__crash`, {
        server: id,
        code: "upstream_error",
        message: /closed the connection during tools\/call "crash"/,
        withinMs: SLACK_MS,
      });
      await othersServe(rig, upstream);
      // An HTTP upstream is not the gateway's process: its supervisor (here, the test) restarts it.
      if (upstream === "http") {
        await rig.httpUpstream.exited;
        await rig.httpUpstream.restart();
      }
      const after = Number(await answersAgain(rig, `${id}__pid`, id));
      assert.notEqual(after, before, "a new process answers");
      await eventually(
        () =>
          eventsSince(rig, mark, "proxy.state").some((e) => e.server === id && e.to === "FAILED"),
        `a proxy.state event taking "${id}" to FAILED`,
      );
      await healthy(rig, upstream);
    },
  },
  {
    rule:
      "a hung call answers timeout naming the server within the call timeout, the upstream sees it cancelled, and other calls are not held up",
    async run(rig, upstream) {
      const id = SERVER[upstream];
      const hung = call(rig.client, `${id}__hang`);
      await eventually(
        async () => (await inflight(rig.client, upstream)) === 1,
        "the hang to start",
      );
      // While it hangs, the same server and the other one still answer.
      await expectText(rig.client, `${id}__ok`, "ok");
      await othersServe(rig, upstream);
      const error = assertError(await hung, {
        server: id,
        code: "timeout",
        message: new RegExp(`did not answer tools/call "hang" within ${CALL_MS} ms`),
        withinMs: CALL_MS + SLACK_MS,
      });
      assert.equal(error.code, -32001, "JSON-RPC RequestTimeout");
      await noCallLeftUpstream(rig, upstream, SLACK_MS);
      await healthy(rig, upstream);
    },
  },
  {
    rule:
      "a frozen process (SIGSTOP) times calls out, goes DEGRADED and trips the breaker OPEN so calls answer circuit_open at once; resumed, it ends READY and CLOSED",
    async run(rig, upstream) {
      const id = SERVER[upstream];
      const pid = await pidOf(rig, upstream);
      signalUpstream(rig, upstream, pid, "SIGSTOP");
      try {
        const calls = await Promise.all(
          Array.from({ length: BREAKER_THRESHOLD }, () => call(rig.client, `${id}__ok`)),
        );
        for (const outcome of calls) {
          assertError(outcome, {
            server: id,
            code: "timeout",
            withinMs: CALL_MS + SLACK_MS,
          }, "a call to the frozen server");
        }
        // The OPEN window is short (1 s): if a stall lets it lapse, the call is the HALF_OPEN probe,
        // times out and opens the breaker again for longer, so a few rounds always catch it OPEN.
        let refused = false;
        for (let round = 0; round < 3 && !refused; round++) {
          await statusBecomes(
            rig,
            id,
            (s) => s.breaker === "OPEN",
            `the breaker of "${id}" to open`,
          );
          const outcome = await call(rig.client, `${id}__ok`);
          if ((outcome.error?.data as { code?: string } | undefined)?.code !== "circuit_open") {
            assertError(outcome, {
              server: id,
              code: "timeout",
              withinMs: CALL_MS + SLACK_MS,
            }, "the probe let through once the window lapsed");
            continue;
          }
          assertError(outcome, {
            server: id,
            code: "circuit_open",
            message: /unavailable/,
            withinMs: 1_000,
          }, "a call while the breaker is OPEN");
          const data = outcome.error!.data as { retryAfterMs?: number };
          assert.ok(typeof data.retryAfterMs === "number", "circuit_open carries retryAfterMs");
          const names = (await rig.client.listTools()).tools.map((t) => t.name);
          assert.ok(!names.includes(`${id}__ok`), "an OPEN server's tools are hidden");
          refused = true;
        }
        assert.ok(refused, "a call was refused with circuit_open while the breaker was OPEN");
        await statusBecomes(rig, id, (s) => s.state === "DEGRADED", `"${id}" to be DEGRADED`);
        await othersServe(rig, upstream);
      } finally {
        signalUpstream(rig, upstream, pid, "SIGCONT");
      }
      // Resumed, its health checks pass: DEGRADED → READY and the breaker closes on its own.
      await statusBecomes(
        rig,
        id,
        (s) => s.state === "READY" && s.breaker === "CLOSED",
        `"${id}" to recover to READY with its breaker CLOSED`,
      );
      await healthy(rig, upstream);
      await othersServe(rig, upstream);
    },
  },
  {
    rule: "a slow answer within the call timeout arrives intact",
    async run(rig, upstream) {
      const ms = CALL_MS / 2;
      const outcome = await expectText(rig.client, `${SERVER[upstream]}__slow`, `slept ${ms}`, {
        ms,
      });
      assert.ok(outcome.ms >= ms);
      await healthy(rig, upstream);
    },
  },
  {
    rule:
      "an answer slower than the call timeout ends in timeout naming the server, and the late answer is dropped",
    async run(rig, upstream) {
      const id = SERVER[upstream];
      const ms = CALL_MS + 400;
      await expectError(rig.client, `${id}__slow`, {
        server: id,
        code: "timeout",
        message: /did not answer tools\/call "slow"/,
        withinMs: CALL_MS + SLACK_MS,
      }, { ms });
      // Give the late answer time to arrive; it must not be taken for the next call's.
      await new Promise((resolve) => setTimeout(resolve, ms - CALL_MS + 200));
      await healthy(rig, upstream);
      await othersServe(rig, upstream);
    },
  },
  {
    rule: "garbage before an answer is dropped and the call answers; the server stays READY",
    async run(rig, upstream) {
      await expectText(rig.client, `${SERVER[upstream]}__garbage`, "after garbage");
      await healthy(rig, upstream);
    },
  },
  {
    rule:
      "a truncated frame is dropped and an answer written in fragments is reassembled; the server stays READY",
    async run(rig, upstream) {
      await expectText(rig.client, `${SERVER[upstream]}__partial`, "after partial frames");
      await healthy(rig, upstream);
    },
  },
  {
    rule:
      "a 50 MB answer is refused and the call ends in an error naming the server within the call timeout; the next call answers",
    async run(rig, upstream) {
      const id = SERVER[upstream];
      await expectError(rig.client, `${id}__huge`, {
        server: id,
        code: ["timeout", "upstream_error"],
        withinMs: CALL_MS + SLACK_MS,
      }, { bytes: 50 * MB });
      await expectText(rig.client, `${id}__huge`, "x".repeat(10), { bytes: 10 });
      await healthy(rig, upstream);
      await othersServe(rig, upstream);
    },
  },
  {
    rule:
      "a flood of 10,000 progress and log notifications during one call reaches the caller in full before the answer",
    async run(rig, upstream) {
      // Counted on the wire: the SDK client itself drops a progress notification whose handler
      // runs (a microtask later) after the answer that arrived in the same read.
      const transport = rig.client.transport!;
      const deliver = transport.onmessage!;
      let progress = 0;
      let logs = 0;
      let atAnswer: { progress: number; logs: number } | undefined;
      transport.onmessage = (message, extra) => {
        const m = message as { method?: string; params?: { logger?: string }; result?: unknown };
        if (m.method === "notifications/progress") progress++;
        else if (m.method === "notifications/message" && m.params?.logger === "flood") logs++;
        else if (JSON.stringify(m.result ?? null).includes("flooded 10000")) {
          atAnswer = { progress, logs };
        }
        deliver(message, extra);
      };
      try {
        await expectText(rig.client, `${SERVER[upstream]}__flood`, "flooded 10000", {
          count: 10_000,
        }, { onprogress: () => {}, resetTimeoutOnProgress: true, maxTotalTimeout: 60_000 });
      } finally {
        transport.onmessage = deliver;
      }
      assert.deepEqual(
        atAnswer,
        { progress: 5_000, logs: 5_000 },
        "every notification arrived before the answer",
      );
      await healthy(rig, upstream);
      await othersServe(rig, upstream);
    },
  },
  {
    rule:
      "a process that exits between calls and is started again is seen FAILED, then READY with the new process and its breaker CLOSED",
    async run(rig, upstream) {
      const id = SERVER[upstream];
      const mark = rig.events.length;
      const before = await pidOf(rig, upstream);
      if (upstream === "http") await rig.httpUpstream.restart();
      else {
        Deno.kill(before, "SIGTERM");
        await eventually(() => !alive(before), "the upstream process to exit");
      }
      const after = Number(await answersAgain(rig, `${id}__pid`, id));
      assert.notEqual(after, before, "the new process answers");
      await eventually(
        () =>
          eventsSince(rig, mark, "proxy.state").some((e) => e.server === id && e.to === "FAILED"),
        `a proxy.state event taking "${id}" to FAILED`,
      );
      await healthy(rig, upstream);
      await othersServe(rig, upstream);
    },
  },
  {
    rule:
      "with NATS stopped and restarted mid-run, calls keep answering during the outage and events flow again after it",
    async run(rig, upstream) {
      const id = SERVER[upstream];
      await rig.nats.restart(async () => {
        for (let i = 0; i < 3; i++) {
          const outcome = await expectText(rig.client, `${id}__ok`, "ok");
          assert.ok(outcome.ms < SLACK_MS, `a call during the outage took ${outcome.ms} ms`);
        }
        await othersServe(rig, upstream);
      });
      await eventually(() => rig.eventsFlushed().then(() => true, () => false), "NATS to be back");
      const mark = rig.events.length;
      await expectText(rig.client, `${id}__ok`, "ok");
      await eventually(
        () => eventsSince(rig, mark, "governance.decision").some((e) => e.tool === `${id}__ok`),
        "the gateway's events on NATS again",
      );
      await healthy(rig, upstream);
    },
  },
  {
    rule:
      "a fleet file replaced by a broken one keeps the running fleet (no restart), calls answer, and fleet.reload_failed names the file and line",
    async run(rig, upstream) {
      const id = SERVER[upstream];
      const before = await pidOf(rig, upstream);
      const mark = rig.events.length;
      await Deno.writeTextFile(rig.fleetPath, BROKEN_FLEET);
      try {
        await eventually(
          () => eventsSince(rig, mark, "fleet.reload_failed").length > 0,
          "a fleet.reload_failed event",
        );
        const [failure] = eventsSince(rig, mark, "fleet.reload_failed");
        assert.match(failure!.reason, /fleet\.yaml:\d+/);
        await eventually(
          () => rig.logs().includes("fleet file not reloaded; the running fleet stays"),
          "the log line saying the fleet stays",
        );
        await expectText(rig.client, `${id}__ok`, "ok");
        await othersServe(rig, upstream);
      } finally {
        await Deno.writeTextFile(rig.fleetPath, rig.fleetText);
      }
      await eventually(
        () => eventsSince(rig, mark, "fleet.reloaded").length > 0,
        "the restored fleet file to be applied",
      );
      const [applied] = eventsSince(rig, mark, "fleet.reloaded");
      assert.deepEqual([applied!.added, applied!.removed, applied!.changed], [[], [], []]);
      assert.equal(await pidOf(rig, upstream), before, "no upstream was restarted");
      await healthy(rig, upstream);
    },
  },
  {
    rule:
      "a policy file replaced by a broken one keeps the policy in force (a denied tool stays denied), calls answer, and policy.reload_failed names the file",
    async run(rig, upstream) {
      const id = SERVER[upstream];
      const denied = { names: `"${id}__secret"`, code: "tool_denied", withinMs: SLACK_MS };
      const mark = rig.events.length;
      await Deno.writeTextFile(rig.policyPath, BROKEN_POLICY);
      try {
        await eventually(
          () => eventsSince(rig, mark, "policy.reload_failed").length > 0,
          "a policy.reload_failed event",
        );
        const [failure] = eventsSince(rig, mark, "policy.reload_failed");
        assert.match(failure!.reason, /policy\.yaml:\d+/);
        await eventually(
          () => rig.logs().includes("policies not reloaded; the previous policy stays in force"),
          "the log line saying the policy stays",
        );
        await expectText(rig.client, `${id}__ok`, "ok");
        await expectError(rig.client, `${id}__secret`, denied);
        await othersServe(rig, upstream);
      } finally {
        await Deno.writeTextFile(rig.policyPath, POLICY);
      }
      await eventually(
        () => eventsSince(rig, mark, "policy.reloaded").length > 0,
        "the restored policy to be applied",
      );
      await expectError(rig.client, `${id}__secret`, denied);
      await healthy(rig, upstream);
    },
  },
  {
    rule:
      "a client that disconnects mid-call leaves the gateway up, the other sessions served and no call running upstream",
    inbounds: ["http", "sse"],
    async run(rig, upstream) {
      const sessions = rig.gateway!.kernel.bridge.sessionCount;
      await abortMidCall(rig, `${SERVER[upstream]}__hang`, () => inflight(rig.client, upstream));
      await noCallLeftUpstream(rig, upstream, CALL_MS + SLACK_MS);
      if (rig.inbound === "sse") {
        // A legacy SSE session lives as long as its GET stream: cut, the gateway ends it. (A
        // Streamable HTTP session outlives a dropped request; the raw one is DELETEd, but the
        // SDK client that checked the others closes without DELETE, so its session stays.)
        await eventually(
          () => rig.gateway!.kernel.bridge.sessionCount === sessions,
          "the cut SSE session (and the checking client's) to end",
        );
      }
      await eventually(() => rig.gateway!.kernel.bridge.inFlightCalls === 0, "no call in flight");
      await healthy(rig, upstream);
      await othersServe(rig, upstream);
    },
  },
  {
    rule:
      "a client that disconnects mid-stream (during a notification flood) leaves the gateway up and the other sessions served",
    inbounds: ["http", "sse"],
    async run(rig, upstream) {
      await abortMidStream(rig, `${SERVER[upstream]}__flood`, { count: 10_000 });
      await eventually(
        () => rig.gateway!.kernel.bridge.inFlightCalls === 0,
        "the flooding call to end",
      );
      await healthy(rig, upstream);
      await othersServe(rig, upstream);
    },
  },
];

/**
 * One gateway, its upstreams and NATS serve every case of an inbound (starting them per case would
 * take minutes); they outlive each case by design, so the per-test leak sanitizers cannot apply to
 * these cases. The stop cases check instead that nothing is left behind.
 */
const SHARED_RIG = { sanitizeOps: false, sanitizeResources: false, ...NEEDS_NATS } as const;

/** Registers every case of the matrix for one inbound transport, sharing one rig. */
export function defineFaultMatrix(inbound: Inbound): void {
  let started: Promise<Rig> | undefined;
  const rig = () => started ??= startRig(inbound);
  for (const fault of FAULTS) {
    if (fault.inbounds && !fault.inbounds.includes(inbound)) continue;
    for (const upstream of UPSTREAMS) {
      Deno.test({
        name: `${inbound} inbound × ${upstream} upstream: ${fault.rule}`,
        ...SHARED_RIG,
      }, async () => {
        await within(CASE_MS, fault.run(await rig(), upstream));
      });
    }
  }
  if (inbound === "stdio") {
    Deno.test(
      "stdio inbound × stdio and http upstreams: closing stdin mid-call ends the gateway cleanly, leaving no upstream process or call behind",
      SHARED_RIG,
      async () => {
        const r = await rig();
        const pid = await pidOf(r, "stdio");
        const hangs = UPSTREAMS.map((u) => call(r.client, `${SERVER[u]}__hang`));
        for (const upstream of UPSTREAMS) {
          await eventually(async () => (await inflight(r.client, upstream)) === 1, "the hangs");
        }
        const exit = await closeStdinMidCall(r);
        assert.equal(exit.code, 0, `the gateway exits cleanly:\n${r.logs().slice(-2000)}`);
        for (const outcome of await Promise.all(hangs)) {
          assert.ok(outcome.error, "the client's own pending calls end when it closes");
        }
        await eventually(() => !alive(pid), "the stdio upstream to exit");
        await eventually(
          async () => (await directInflight(r.httpUpstream.url)) === 0,
          "the HTTP upstream to have no call left",
        );
        await r.teardown();
      },
    );
  } else {
    Deno.test(
      `${inbound} inbound: stopping the gateway leaves no upstream process or call behind`,
      SHARED_RIG,
      async () => {
        const r = await rig();
        const pid = await pidOf(r, "stdio");
        const hangs = UPSTREAMS.map((u) => call(r.client, `${SERVER[u]}__hang`));
        for (const upstream of UPSTREAMS) {
          await eventually(async () => (await inflight(r.client, upstream)) === 1, "the hangs");
        }
        await r.stopGateway();
        for (const outcome of await Promise.all(hangs)) {
          assert.ok(outcome.error, "calls pending at shutdown end with an error");
        }
        await eventually(() => !alive(pid), "the stdio upstream to exit");
        await eventually(
          async () => (await directInflight(r.httpUpstream.url)) === 0,
          "the HTTP upstream to have no call left",
        );
        await r.teardown();
      },
    );
  }
}

/** A case that outlives this is stuck: fail it rather than the whole run. */
const CASE_MS = 60_000;

async function within(ms: number, work: Promise<void>): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stuck = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the case did not finish within ${ms} ms`)), ms);
  });
  try {
    await Promise.race([work, stuck]);
  } finally {
    clearTimeout(timer);
  }
}

async function closeStdinMidCall(rig: Rig): Promise<Deno.CommandStatus> {
  await rig.client.close();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const status = await Promise.race([
    rig.child!.process.status,
    new Promise<undefined>((resolve) => timer = setTimeout(() => resolve(undefined), 15_000)),
  ]);
  clearTimeout(timer);
  assert.ok(status, "the gateway exits within 15 s of stdin closing");
  return status;
}
