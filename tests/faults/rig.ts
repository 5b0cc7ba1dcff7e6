/**
 * The fault suite's rig: one real gateway per inbound transport, shared by every case of that
 * transport, in front of a fleet of fault fixtures (over stdio and over Streamable HTTP, each
 * healthy one with a twin that dies at start), with NATS as its event bus and its own policy.
 * @module
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { RequestOptions } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { type CallToolResult, McpError } from "@modelcontextprotocol/sdk/types.js";
import { connect, type NatsConnection } from "nats";
import { StreamTransport } from "../../core/mcp/stream_transport.ts";
import { type GatewayEvent, SUBJECT_PREFIX } from "../../core/bus/events.ts";
import { type ChildGateway, spawnStdioGateway } from "../support/child_gateway.ts";
import { eventually, faultServer, writeFleet } from "../support/fleet.ts";
import { connectHttp, connectSse, startGateway, type TestGateway } from "../support/gateway.ts";
import { type NatsServerHandle, startNatsServer } from "../support/nats_server.ts";
import { type HttpFaultServer, startHttpFault } from "./http_fault.ts";

/** How clients reach the gateway. */
export type Inbound = "stdio" | "http" | "sse";
/** How the gateway reaches an upstream. */
export type Upstream = "stdio" | "http";

/** Every upstream transport, in matrix order. */
export const UPSTREAMS: readonly Upstream[] = ["stdio", "http"];
/** Fleet id of the healthy fault fixture per upstream transport. */
export const SERVER: Readonly<Record<Upstream, string>> = { stdio: "s", http: "h" };
/** Fleet id of the fixture that dies at start per upstream transport. */
export const DEAD: Readonly<Record<Upstream, string>> = { stdio: "sdead", http: "hdead" };
/** The fleet's call timeout (timeouts.call) of the healthy fixtures. */
export const CALL_MS = 1_500;
/** Time on top of a timeout that a loaded 2-core machine may need to deliver an answer. */
export const SLACK_MS = 2_500;
/** Breaker threshold (consecutive failures) of the healthy fixtures. */
export const BREAKER_THRESHOLD = 4;

/** The tuning of the healthy fixtures: fast timeouts, a health check every second. */
const TUNING = `
    timeouts: { connect: 20, call: ${CALL_MS / 1000} }
    health: { interval: 1, degraded_after: 1, failed_after: 5 }
    breaker: { threshold: ${BREAKER_THRESHOLD}, base: 1, max: 2 }`;
/** The dead fixtures retry rarely, so they cost nothing while the suite runs. */
const DEAD_TUNING = `
    timeouts: { connect: 20, call: 1 }
    breaker: { threshold: 4, base: 300, max: 600 }`;

/** The fault fixture with `tuning` (YAML lines, each after a newline, as httpEntry takes them). */
function stdioEntry(id: string, fault: string, tuning: string): string {
  return faultServer(id, { fault, extra: `${tuning.slice(1)}\n` });
}

function httpEntry(id: string, url: string, tuning: string): string {
  return `
  - id: ${id}
    transport: http
    url: ${url}${tuning}`;
}

/** The suite's policy: everything is allowed but `secret` on any server. */
export const POLICY = `tenants:
  "*":
    deny: ["*__secret"]
    approval: []
`;
/** A policy file that does not parse. */
export const BROKEN_POLICY = `tenants:\n  "*":\n    deny: [unclosed\n`;
/** A fleet file that does not parse. */
export const BROKEN_FLEET = "proxy_servers:\n  - id: [unclosed\n";

/** An upstream's lifecycle and breaker state as the gateway reports it. */
export interface ServerStatus {
  state: string;
  breaker: string;
  lastError?: string;
}

/** A gateway event as it arrived on NATS. */
export type SeenEvent = GatewayEvent & { origin?: string };

/** One gateway, its fleet and everything a case needs to fault and observe it. */
export interface Rig {
  inbound: Inbound;
  /** The main client session. */
  client: Client;
  /** Opens another session (HTTP and SSE; stdio serves exactly one). */
  openClient?: () => Promise<Client>;
  /** The in-process gateway (HTTP and SSE inbound). */
  gateway?: TestGateway;
  /** The gateway child process (stdio inbound). */
  child?: ChildGateway;
  /** Lifecycle and breaker state of one upstream. */
  status(server: string): Promise<ServerStatus>;
  /** Every event the gateway published, in order, as seen on NATS. */
  events: SeenEvent[];
  /** Waits until this test's own NATS subscription is connected and flushed. */
  eventsFlushed(): Promise<void>;
  /** The gateway's log so far. */
  logs(): string;
  nats: NatsServerHandle;
  /** The process behind upstream "h". */
  httpUpstream: HttpFaultServer;
  fleetPath: string;
  fleetText: string;
  policyPath: string;
  /** Stops the gateway (closing the main client first); idempotent. */
  stopGateway(): Promise<void>;
  /** Stops the gateway, the fixtures and NATS, and removes the files. */
  teardown(): Promise<void>;
}

/** Starts the rig for one inbound transport and waits until its fleet has settled. */
export async function startRig(inbound: Inbound): Promise<Rig> {
  const nats = await startNatsServer();
  const watcher = await watchEvents(nats.url);
  const httpUpstream = await startHttpFault();
  // A real process that dies before it listens: its port is the dead HTTP server's URL.
  const deadHttp = await startHttpFault({ fault: "exit-at-start" });
  const fleetText = `proxy_servers:${stdioEntry(SERVER.stdio, "none", TUNING)}${
    httpEntry(SERVER.http, httpUpstream.url, TUNING)
  }${stdioEntry(DEAD.stdio, "exit-at-start", DEAD_TUNING)}${
    httpEntry(DEAD.http, deadHttp.url, DEAD_TUNING)
  }\n`;
  const fleet = await writeFleet(fleetText);
  const policyDir = `${fleet.dir}/policies`;
  const policyPath = `${policyDir}/policy.yaml`;
  await Deno.mkdir(policyDir);
  await Deno.writeTextFile(policyPath, POLICY);
  const env = {
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: policyDir,
    NATS_URL: nats.url,
  };

  let rig: Rig;
  const common = {
    inbound,
    events: watcher.events,
    eventsFlushed: watcher.flushed,
    nats,
    httpUpstream,
    fleetPath: fleet.path,
    fleetText,
    policyPath,
  };
  const cleanup = async () => {
    await httpUpstream.stop();
    await deadHttp.stop();
    await watcher.close();
    await nats.stop();
    await fleet.remove();
  };
  if (inbound === "stdio") {
    const child = spawnStdioGateway(env);
    const client = new Client({ name: "faults-stdio", version: "1.0.0" });
    await client.connect(
      new StreamTransport(child.stdout, child.stdin, {
        maxMessageBytes: 64 << 20,
        answerMalformed: false,
      }),
    );
    rig = {
      ...common,
      client,
      child,
      status: (server) => Promise.resolve(statusFromEvents(watcher.events, server)),
      logs: () => child.stderrSoFar(),
      stopGateway: once(async () => {
        await client.close();
        await child.close();
      }),
      async teardown() {
        await rig.stopGateway();
        await cleanup();
      },
    };
  } else {
    const gateway = await startGateway(env);
    const open = () => inbound === "http" ? connectHttp(gateway) : connectSse(gateway);
    const client = await open();
    rig = {
      ...common,
      client,
      gateway,
      openClient: open,
      status: (server) => statusFromApi(gateway, server),
      logs: () => gateway.logs.join("\n"),
      stopGateway: once(async () => {
        await client.close();
        await gateway.stop();
      }),
      async teardown() {
        await rig.stopGateway();
        await cleanup();
      },
    };
  }
  await eventually(async () => {
    const states = await Promise.all(
      [...Object.values(SERVER), ...Object.values(DEAD)].map((id) => rig.status(id)),
    );
    return states.every((s, i) => s.state === (i < 2 ? "READY" : "FAILED"));
  }, "the fleet to settle (healthy fixtures READY, dead ones FAILED)");
  return rig;
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => running ??= fn();
}

async function statusFromApi(gateway: TestGateway, server: string): Promise<ServerStatus> {
  const response = await fetch(`${gateway.url}/v1/operator/status`, {
    headers: { Authorization: `Bearer ${gateway.token}` },
  });
  assert.equal(response.status, 200);
  const body = await response.json() as {
    servers: { id: string; state: string; breaker: { state: string }; lastError?: string }[];
  };
  const found = body.servers.find((s) => s.id === server);
  assert.ok(found, `GET /v1/operator/status lists "${server}"`);
  return {
    state: found.state,
    breaker: found.breaker.state,
    ...(found.lastError === undefined ? {} : { lastError: found.lastError }),
  };
}

/** A server's state replayed from its `proxy.state` and `proxy.breaker` events. */
function statusFromEvents(events: readonly SeenEvent[], server: string): ServerStatus {
  const status: ServerStatus = { state: "STOPPED", breaker: "CLOSED" };
  for (const event of events) {
    if (event.type === "proxy.state" && event.server === server) {
      status.state = event.to;
      if (event.to === "FAILED" && event.reason !== undefined) status.lastError = event.reason;
    } else if (event.type === "proxy.breaker" && event.server === server) {
      status.breaker = event.to;
    }
  }
  return status;
}

/** Subscribes to every gateway subject on NATS. */
async function watchEvents(url: string): Promise<{
  events: SeenEvent[];
  flushed(): Promise<void>;
  close(): Promise<void>;
}> {
  const connection: NatsConnection = await connect({
    servers: url,
    reconnectTimeWait: 100,
    maxReconnectAttempts: -1,
  });
  const subscription = connection.subscribe(`${SUBJECT_PREFIX}.>`);
  const events: SeenEvent[] = [];
  const reading = (async () => {
    for await (const message of subscription) events.push(message.json<SeenEvent>());
  })();
  return {
    events,
    flushed: () => connection.flush(),
    async close() {
      await connection.close();
      await reading;
    },
  };
}

/** What a call came to: its text, or the error it was answered with, and how long it took. */
export interface Outcome {
  text?: string;
  error?: McpError;
  ms: number;
}

/** A tool call that always settles: answered, refused, or (a backstop) timed out by the client. */
export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
  options: RequestOptions = {},
): Promise<Outcome> {
  const started = performance.now();
  try {
    const result = await client.callTool({ name, arguments: args }, undefined, {
      timeout: CALL_MS + SLACK_MS + 5_000,
      ...options,
    }) as CallToolResult;
    const first = result.content[0];
    return {
      text: first?.type === "text" ? first.text : JSON.stringify(result.content),
      ms: performance.now() - started,
    };
  } catch (error) {
    if (!(error instanceof McpError)) throw error;
    return { error, ms: performance.now() - started };
  }
}

/** Calls a tool and asserts it answered with `expected`. */
export async function expectText(
  client: Client,
  name: string,
  expected: string | RegExp,
  args: Record<string, unknown> = {},
  options: RequestOptions = {},
): Promise<Outcome> {
  const outcome = await call(client, name, args, options);
  assert.ok(
    outcome.error === undefined,
    `${name} answered, not ${outcome.error?.message} (${JSON.stringify(outcome.error?.data)})`,
  );
  if (typeof expected === "string") assert.equal(outcome.text, expected);
  else assert.match(outcome.text ?? "", expected);
  return outcome;
}

/** What an expected error must carry. */
export interface ErrorShape {
  /** The server the error must name (in its message and `data.server`). */
  server?: string;
  /** Text the message must contain instead, when the error is not about a server. */
  names?: string;
  /** Acceptable stable codes (`data.code`). */
  code: string | string[];
  message?: RegExp;
  /** The error must arrive within this long. */
  withinMs: number;
}

/** Asserts an outcome is an error of the given shape. */
export function assertError(outcome: Outcome, shape: ErrorShape, what = "the call"): McpError {
  const { error } = outcome;
  assert.ok(error, `${what} answered "${outcome.text?.slice(0, 80)}" instead of failing`);
  const data = error.data as { code?: string; server?: string } | undefined;
  const codes = Array.isArray(shape.code) ? shape.code : [shape.code];
  assert.ok(
    codes.includes(data?.code ?? ""),
    `${what} failed with data.code ${data?.code}, expected ${codes.join(" or ")}: ${error.message}`,
  );
  if (shape.server !== undefined) {
    assert.equal(data?.server, shape.server, `data.server of: ${error.message}`);
  }
  const named = shape.names ?? `"${shape.server}"`;
  assert.ok(error.message.includes(named), `the message names ${named}: ${error.message}`);
  if (shape.message) assert.match(error.message, shape.message);
  assert.ok(
    outcome.ms <= shape.withinMs,
    `${what} took ${Math.round(outcome.ms)} ms, more than ${shape.withinMs} ms`,
  );
  return error;
}

/** Calls a tool and asserts it failed with an error of the given shape. */
export async function expectError(
  client: Client,
  name: string,
  shape: ErrorShape,
  args: Record<string, unknown> = {},
): Promise<McpError> {
  return assertError(await call(client, name, args), shape, name);
}

/** Polls until the server's status satisfies `check`; returns that status. */
export async function statusBecomes(
  rig: Rig,
  server: string,
  check: (status: ServerStatus) => boolean,
  what: string,
  ms = 15_000,
): Promise<ServerStatus> {
  let last: ServerStatus | undefined;
  try {
    await eventually(async () => check(last = await rig.status(server)), what, ms);
  } catch (error) {
    throw new Error(
      `${(error as Error).message}; last status of "${server}": ${JSON.stringify(last)}`,
    );
  }
  return last!;
}

/** Events of one type published since `mark` (an index into `rig.events`). */
export function eventsSince<T extends SeenEvent["type"]>(
  rig: Rig,
  mark: number,
  type: T,
): Extract<SeenEvent, { type: T }>[] {
  return rig.events.slice(mark).filter((e): e is Extract<SeenEvent, { type: T }> =>
    e.type === type
  );
}
