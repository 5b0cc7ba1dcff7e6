/**
 * Attacks on the admin routes over real sockets (raw HTTP where a client library would tidy the
 * request up): path traversal in route params, header and YAML injection through ids, JSON fields
 * and query values, oversized bodies, slow-loris clients, and what a browser page can send
 * cross-site (a body that is not JSON, an Origin on another port). Each is refused with its status and
 * a stable code, and nothing reaches a service: the fleet file stays byte-for-byte the same, no
 * backup is written, the fleet is not re-applied.
 */
import assert from "node:assert/strict";
import type { GatewayEvent } from "../../core/bus/events.ts";
import { writeFleet } from "../support/fleet.ts";
import { startGateway, type TestGateway } from "../support/gateway.ts";

const FLEET = `# attacks must leave this file alone
proxy_servers:
  - id: one
    url: https://one.example.com/mcp
    enabled: false
  - id: two
    url: https://two.example.com/mcp
    enabled: false
`;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

interface Setup {
  gateway: TestGateway;
  port: number;
  fleetPath: string;
  events: GatewayEvent[];
}

/** A gateway over a fleet of disabled entries; afterwards, checks nothing touched the fleet. */
async function withGateway(
  env: Record<string, string>,
  fn: (setup: Setup) => Promise<void>,
  options: { noAuth?: boolean; noAuthAdmin?: boolean } = {},
): Promise<void> {
  const fleet = await writeFleet(FLEET);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path, ...env }, options);
  const events: GatewayEvent[] = [];
  gateway.kernel.bus.subscribe((e) => events.push(e));
  try {
    await gateway.kernel.fleetStarted;
    const port = Number(new URL(gateway.url).port);
    await fn({ gateway, port, fleetPath: fleet.path, events });
    assert.equal(await Deno.readTextFile(fleet.path), FLEET, "the fleet file is byte-identical");
    await assert.rejects(Deno.stat(`${fleet.path}.bak`), Deno.errors.NotFound, "no backup");
    assert.deepEqual(gateway.kernel.fleet.map((s) => s.id), ["one", "two"]);
    assert.ok(!events.some((e) => e.type.startsWith("fleet.")), "the fleet was not re-applied");
    assert.equal(gateway.kernel.mcpEnabled, true, "the MCP interface is still on");
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
}

interface RawAnswer {
  status: number;
  /** Header names in lower case. */
  headers: Map<string, string>;
  // deno-lint-ignore no-explicit-any
  body: any;
}

/** Reads one HTTP/1.1 response (Content-Length bodies: every answer here is JSON). */
async function readResponse(conn: Deno.Conn): Promise<RawAnswer> {
  let bytes = new Uint8Array(0);
  const buffer = new Uint8Array(16 * 1024);
  const more = async () => {
    const n = await conn.read(buffer);
    if (n === null) throw new Error(`connection closed after ${decoder.decode(bytes)}`);
    const next = new Uint8Array(bytes.length + n);
    next.set(bytes);
    next.set(buffer.subarray(0, n), bytes.length);
    bytes = next;
  };
  let end = -1;
  while ((end = decoder.decode(bytes).indexOf("\r\n\r\n")) === -1) await more();
  const [statusLine, ...lines] = decoder.decode(bytes).slice(0, end).split("\r\n");
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  const length = Number(headers.get("content-length") ?? "0");
  const start = encoder.encode(decoder.decode(bytes).slice(0, end + 4)).length;
  while (bytes.length < start + length) await more();
  const text = decoder.decode(bytes.subarray(start, start + length));
  return {
    status: Number(statusLine!.split(" ")[1]),
    headers,
    body: text ? JSON.parse(text) : undefined,
  };
}

/** One raw request, exactly as written (the path is not normalized by any client). */
async function raw(
  setup: Setup,
  method: string,
  path: string,
  options: { body?: string; headers?: string[]; token?: string | null } = {},
): Promise<RawAnswer> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: setup.port });
  try {
    const token = options.token === undefined ? setup.gateway.token : options.token;
    const body = options.body ?? "";
    const head = [
      `${method} ${path} HTTP/1.1`,
      `Host: 127.0.0.1:${setup.port}`,
      ...(token === null ? [] : [`Authorization: Bearer ${token}`]),
      ...(body
        ? ["Content-Type: application/json", `Content-Length: ${encoder.encode(body).length}`]
        : []),
      ...(options.headers ?? []),
      "Connection: close",
    ];
    await conn.write(encoder.encode(head.join("\r\n") + "\r\n\r\n" + body));
    return await readResponse(conn);
  } finally {
    conn.close();
  }
}

/** Asserts a refusal: its status, its stable code, and no header made from the request. */
function refused(answer: RawAnswer, status: number, code: string, what: string): void {
  assert.equal(answer.status, status, `${what}: ${JSON.stringify(answer.body)}`);
  assert.equal(answer.body?.error?.code, code, what);
  assert.ok(typeof answer.body.error.message === "string" && answer.body.error.message.length > 20);
  for (const name of answer.headers.keys()) {
    assert.ok(!name.includes("injected"), `${what}: ${name}`);
  }
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("Path traversal and malformed ids in route params are refused with 400 and never reach the fleet file", async () => {
  await withGateway({}, async (setup) => {
    const servers = "/v1/mcp/proxy/servers";
    const invalidPath: [string, string][] = [
      ["GET", `${servers}/..%2F..%2Fetc%2Fpasswd`],
      ["DELETE", `${servers}/..%2F..%2Fetc%2Fpasswd`],
      ["GET", `${servers}/%2e%2e`],
      ["DELETE", `${servers}/%2E%2e`],
      ["GET", `${servers}/../../../etc/passwd`],
      // Would resolve to POST /v1/mcp/disable: a server action that turns the MCP interface off.
      ["POST", `${servers}/one/%2e%2e/%2e%2e/%2e%2e/disable`],
      ["POST", `${servers}/one/../../../disable`],
      ["DELETE", `${servers}/one%2F..%2F..%2Ffleet.yaml`],
      ["DELETE", `${servers}/..%5C..%5Cfleet.yaml`],
      ["GET", `${servers}/a%00b`],
      ["DELETE", `${servers}/one%0D%0AX-Injected:%20yes`],
      ["GET", `${servers}/%E0%A4%A`],
      ["GET", `${servers}/%C0%AE%C0%AE`],
      ["GET", `${servers}/%`],
      ["GET", "/v1/connectors/..%2F..%2Fetc%2Fpasswd"],
      ["GET", "/v1/connectors/%E0%A4%A"],
      ["POST", "/v1/approvals/..%2F..%2Fetc%2Fpasswd/approve"],
      ["POST", "/mcp/%E0%A4%A"],
      ["POST", "/mcp/..%2F..%2Fv1%2Fmcp%2Fdisable"],
    ];
    for (const [method, path] of invalidPath) {
      refused(await raw(setup, method, path), 400, "invalid_path", `${method} ${path}`);
    }
    const invalidId: [string, string][] = [
      ["GET", `${servers}/caf%C3%A9`],
      ["DELETE", `${servers}/%E2%80%AEeno`],
      ["POST", `${servers}/ONE/disable`],
      ["DELETE", `${servers}/-one`],
      ["POST", `${servers}/one%20two/enable`],
    ];
    for (const [method, path] of invalidId) {
      refused(await raw(setup, method, path), 400, "invalid_id", `${method} ${path}`);
    }
    const long = "a".repeat(4000);
    refused(
      await raw(setup, "DELETE", `${servers}/${long}`),
      404,
      "not_found",
      "a long unknown id",
    );
    // The path check needs no credentials: it tells the caller nothing it did not send.
    refused(
      await raw(setup, "DELETE", `${servers}/..%2F..%2Fetc%2Fpasswd`, { token: null }),
      400,
      "invalid_path",
      "an anonymous traversal",
    );
  });
});

Deno.test("Line breaks in JSON fields and query values are refused before the YAML file or a header sees them", async () => {
  await withGateway({}, async (setup) => {
    const url = "https://evil.example.com/mcp";
    const entries: [string, Record<string, unknown>][] = [
      ["id", { id: "evil\nenabled: false", url }],
      ["id with CRLF", { id: "evil\r\n  - id: pwned", url }],
      ["command", { id: "evil", command: ["deno\nsandbox: none", "run", "x.ts"] }],
      ["header value", { id: "evil", url, headers: { "X-A": "v\r\nX-Injected: yes" } }],
      ["header name", { id: "evil", url, headers: { "X\r\nInjected": "v" } }],
      ["env key", { id: "evil", command: ["deno"], env: { "A\nB": "c" } }],
      ["env value with NUL", { id: "evil", command: ["deno"], env: { A: "a\u0000b" } }],
      ["url", { id: "evil", url: `${url}\r\nHost: attacker.example` }],
      ["tool glob", { id: "evil", url, tools: { allow: ["*\n"] } }],
    ];
    for (const [what, entry] of entries) {
      const answer = await raw(setup, "POST", "/v1/mcp/proxy/servers", {
        body: JSON.stringify(entry),
      });
      refused(answer, 400, "invalid_fleet", what);
      assert.match(answer.body.error.message, /control character|line break/, what);
    }
    const nested = `{"id":"evil","url":"${url}","tools":{"allow":${"[".repeat(50_000)}${
      "]".repeat(50_000)
    }}}`;
    refused(
      await raw(setup, "POST", "/v1/mcp/proxy/servers", { body: nested }),
      400,
      "invalid_fleet",
      "deep nesting",
    );
    refused(
      await raw(setup, "POST", "/v1/mcp/proxy/servers", {
        body: `{"id":"evil","url":"${url}","__proto__":{"enabled":true}}`,
      }),
      400,
      "invalid_fleet",
      "a __proto__ key",
    );
    refused(
      await raw(setup, "GET", "/v1/approvals?status=pending%0D%0AX-Injected:%20yes"),
      400,
      "invalid_request",
      "a status with CRLF",
    );
    refused(
      await raw(setup, "POST", `/v1/approvals/${crypto.randomUUID()}/deny`, {
        body: JSON.stringify({ reason: "x".repeat(100_000) }),
      }),
      400,
      "invalid_request",
      "an oversized denial reason",
    );
    refused(
      await raw(setup, "POST", "/v1/scanner/release", {
        body: JSON.stringify({ server: "one\r\nX-Injected: yes", tool: "t" }),
      }),
      404,
      "not_found",
      "a release of a server with CRLF",
    );
  });
});

Deno.test({
  name: "Oversized admin bodies get 413 without the gateway reading them, declared or chunked",
  // The gateway deliberately leaves the refused body unread (cancelling it would make Deno hold
  // the connection); the in-process server's request-body resource is what this test proves.
  sanitizeResources: false,
}, async () => {
  const limit = 64 * 1024;
  await withGateway({ MCP_MAX_MESSAGE_BYTES: String(limit) }, async (setup) => {
    // Declared: answered from the headers alone, while the client has sent nothing of the body.
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: setup.port });
    try {
      const started = performance.now();
      await conn.write(encoder.encode([
        "POST /v1/mcp/proxy/servers HTTP/1.1",
        `Host: 127.0.0.1:${setup.port}`,
        `Authorization: Bearer ${setup.gateway.token}`,
        "Content-Type: application/json",
        "Content-Length: 1073741824",
        "",
        "",
      ].join("\r\n")));
      const answer = await readResponse(conn);
      refused(answer, 413, "payload_too_large", "a declared 1 GiB body");
      assert.match(answer.body.error.message, /MCP_MAX_MESSAGE_BYTES/);
      assert.ok(performance.now() - started < 5_000);
    } finally {
      conn.close();
    }

    // Chunked: no length to check, so it is read up to the limit and no further.
    const chunked = await Deno.connect({ hostname: "127.0.0.1", port: setup.port });
    try {
      await chunked.write(encoder.encode([
        "POST /v1/mcp/proxy/servers HTTP/1.1",
        `Host: 127.0.0.1:${setup.port}`,
        `Authorization: Bearer ${setup.gateway.token}`,
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
        "",
        "",
      ].join("\r\n")));
      const chunk = "x".repeat(8 * 1024);
      const sent = 10; // 80 KiB, past the 64 KiB limit; the terminating chunk never comes
      for (let i = 0; i < sent; i++) {
        await chunked.write(encoder.encode(`${chunk.length.toString(16)}\r\n${chunk}\r\n`));
      }
      refused(await readResponse(chunked), 413, "payload_too_large", "a chunked body");
    } finally {
      chunked.close();
    }

    const big = { id: "big", url: "https://big.example.com/mcp", env: { PAD: "x".repeat(limit) } };
    refused(
      await raw(setup, "POST", "/v1/mcp/proxy/servers", { body: JSON.stringify(big) }),
      413,
      "payload_too_large",
      "a JSON body over the limit",
    );
    refused(
      await raw(setup, "POST", "/v1/approvals/x/deny", { body: "x".repeat(limit + 1) }),
      413,
      "payload_too_large",
      "an oversized deny body",
    );
  });
});

Deno.test("A client trickling its body gets 408 within the deadline, blocks nobody, and does not hold the stop", async () => {
  await withGateway({ MCP_HTTP_BODY_TIMEOUT_MS: "1000" }, async (setup) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: setup.port });
    let trickling = true;
    const trickle = (async () => {
      await conn.write(encoder.encode([
        "POST /v1/mcp/proxy/servers HTTP/1.1",
        `Host: 127.0.0.1:${setup.port}`,
        `Authorization: Bearer ${setup.gateway.token}`,
        "Content-Type: application/json",
        "Content-Length: 10000",
        "",
        '{"id": "slow", ',
      ].join("\r\n")));
      while (trickling) {
        await delay(100);
        await conn.write(encoder.encode(" ")).catch(() => trickling = false);
      }
    })();
    try {
      const started = performance.now();
      const answer = readResponse(conn);
      // Meanwhile other clients are served at once.
      for (let i = 0; i < 5; i++) {
        const before = performance.now();
        const status = await raw(setup, "GET", "/v1/mcp/status");
        assert.equal(status.status, 200);
        assert.ok(performance.now() - before < 900, "another client waited on the slow one");
      }
      const timedOut = await answer;
      const took = performance.now() - started;
      refused(timedOut, 408, "request_timeout", "a trickled body");
      assert.match(timedOut.body.error.message, /1000 ms \(MCP_HTTP_BODY_TIMEOUT_MS\)/);
      assert.ok(took >= 900 && took < 4_000, `408 after ${Math.round(took)} ms`);

      // The client keeps trickling on a connection Deno will not drop: the stop must not wait.
      const stopping = performance.now();
      await setup.gateway.stop();
      assert.ok(performance.now() - stopping < 5_000, "the stop was held by the slow client");
    } finally {
      trickling = false;
      await trickle;
      conn.close();
    }
  });
});

Deno.test("Connections that never finish their headers block no other client and do not hold the stop", async () => {
  await withGateway({}, async (setup) => {
    const lingering: Deno.Conn[] = [];
    try {
      for (let i = 0; i < 50; i++) {
        const conn = await Deno.connect({ hostname: "127.0.0.1", port: setup.port });
        await conn.write(encoder.encode(`GET /v1/mcp/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A:`));
        lingering.push(conn);
      }
      for (let i = 0; i < 5; i++) {
        const before = performance.now();
        assert.equal((await raw(setup, "GET", "/v1/mcp/status")).status, 200);
        assert.ok(performance.now() - before < 900);
      }
      const stopping = performance.now();
      await setup.gateway.stop();
      assert.ok(performance.now() - stopping < 5_000, "the stop was held by half-open clients");
    } finally {
      for (const conn of lingering) conn.close();
    }
  });
});

/** A fleet entry a hostile page would like to add: a server that runs a shell command. */
const PWN = JSON.stringify({ id: "pwn", command: ["sh", "-c", "touch /tmp/agent33-pwned"] });

Deno.test("An admin request whose body is not JSON is refused with 415 before any handler (no cross-site form or no-cors fetch)", async () => {
  await withGateway({}, async (setup) => {
    const url = `${setup.gateway.url}/v1/mcp/proxy/servers`;
    const auth = { Authorization: `Bearer ${setup.gateway.token}` };
    for (
      const [what, init] of [
        ["text/plain", { headers: { ...auth, "Content-Type": "text/plain" }, body: PWN }],
        [
          "a form",
          {
            headers: { ...auth, "Content-Type": "application/x-www-form-urlencoded" },
            body: PWN,
          },
        ],
        ["a body without a type", { headers: auth, body: new Blob([PWN]) }],
      ] as const
    ) {
      const answer = await fetch(url, { method: "POST", ...init });
      assert.equal(answer.status, 415, what);
      const body = await answer.json();
      assert.equal(body.error.code, "unsupported_media_type", what);
      assert.match(body.error.message, /Content-Type: application\/json/, what);
    }
    const approve = await fetch(`${setup.gateway.url}/v1/approvals/x/approve`, {
      method: "POST",
      headers: { ...auth, "Content-Type": "text/plain" },
      body: "{}",
    });
    assert.equal(approve.status, 415, "approval decisions too");
    await approve.body?.cancel();
    // JSON with a charset parameter is JSON: it reaches the handler (which refuses the entry).
    const json = await fetch(url, {
      method: "POST",
      headers: { ...auth, "Content-Type": "application/json; charset=utf-8" },
      body: JSON.stringify({ id: "bad id!" }),
    });
    assert.equal(json.status, 400);
    await json.body?.cancel();
  });
});

Deno.test("A page on another localhost port cannot use the admin API, even under --no-auth --no-auth-admin", async () => {
  await withGateway({}, async (setup) => {
    const url = `${setup.gateway.url}/v1/mcp/proxy/servers`;
    const post = (origin: string) =>
      fetch(url, {
        method: "POST",
        headers: { Origin: origin, "Content-Type": "application/json" },
        body: PWN,
      });
    for (
      const origin of [
        `http://localhost:${setup.port + 1}`,
        `http://127.0.0.1:${setup.port === 3000 ? 3001 : 3000}`,
        "http://localhost",
      ]
    ) {
      const answer = await post(origin);
      assert.equal(answer.status, 403, origin);
      assert.match((await answer.json()).error.message, /Origin .* is not allowed/, origin);
    }
    // The gateway's own origin (the dashboard) passes the check and reaches the handler.
    const own = await fetch(url, {
      method: "POST",
      headers: { Origin: `http://127.0.0.1:${setup.port}`, "Content-Type": "application/json" },
      body: JSON.stringify({ id: "bad id!" }),
    });
    assert.equal(own.status, 400);
    await own.body?.cancel();
  }, { noAuth: true, noAuthAdmin: true });
});
