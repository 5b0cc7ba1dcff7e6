import assert from "node:assert/strict";
import { createHostGuard, isLoopbackHost } from "./host_guard.ts";

function request(headers: Record<string, string>): Request {
  const r = new Request("http://127.0.0.1:8787/mcp", { method: "POST" });
  // Request construction derives no Host header, so set exactly what the test names.
  for (const [k, v] of Object.entries(headers)) r.headers.set(k, v);
  return r;
}

const loopback = createHostGuard({ host: "127.0.0.1", port: 8787 });

Deno.test("isLoopbackHost accepts 127.0.0.0/8, ::1 and localhost", () => {
  for (const h of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"]) {
    assert.equal(isLoopbackHost(h), true, h);
  }
});

Deno.test("isLoopbackHost rejects other and look-alike hosts", () => {
  for (const h of ["0.0.0.0", "10.0.0.1", "127.0.0.256", "localhost.evil.example", "::2", ""]) {
    assert.equal(isLoopbackHost(h), false, h);
  }
});

Deno.test("Host guard accepts loopback names with and without the bound port", () => {
  for (
    const host of [
      "localhost",
      "127.0.0.1",
      "[::1]",
      "localhost:8787",
      "127.0.0.1:8787",
      "[::1]:8787",
    ]
  ) {
    assert.deepEqual(loopback(request({ host })), { ok: true }, host);
  }
});

Deno.test("Host guard rejects a loopback name on another port", () => {
  assert.equal(loopback(request({ host: "localhost:9999" })).ok, false);
});

Deno.test("Host guard rejects a foreign Host with 403 naming MCP_ALLOWED_HOSTS", () => {
  assert.deepEqual(loopback(request({ host: "evil.example" })), {
    ok: false,
    status: 403,
    message:
      'Host "evil.example" is not allowed; connect to http://127.0.0.1:8787 or add it to MCP_ALLOWED_HOSTS',
  });
});

Deno.test("Host guard rejects a request without a Host header", () => {
  const verdict = loopback(request({}));
  assert.deepEqual(verdict, {
    ok: false,
    status: 403,
    message: "Missing Host header; connect to http://127.0.0.1:8787",
  });
});

Deno.test("Host guard accepts a request without an Origin header", () => {
  assert.deepEqual(loopback(request({ host: "localhost:8787" })), { ok: true });
});

Deno.test("Host guard accepts an http(s) Origin on an allowed host at the port the request was sent to", () => {
  for (
    const origin of [
      "http://localhost:8787",
      "http://127.0.0.1:8787",
      "https://[::1]:8787",
    ]
  ) {
    assert.deepEqual(loopback(request({ host: "localhost:8787", origin })), { ok: true }, origin);
  }
  assert.deepEqual(loopback(request({ host: "localhost", origin: "http://localhost" })), {
    ok: true,
  });
});

Deno.test("Host guard rejects an Origin on another port of an allowed host", () => {
  for (
    const [host, origin] of [
      ["localhost:8787", "http://localhost:6274"],
      ["localhost:8787", "http://localhost"],
      ["localhost:8787", "https://127.0.0.1"],
      ["127.0.0.1:8787", "http://[::1]:3000"],
      ["localhost", "http://localhost:8787"],
    ]
  ) {
    const verdict = loopback(request({ host: host!, origin: origin! }));
    assert.equal(verdict.ok, false, `${origin} → ${host}`);
    assert.match(!verdict.ok ? verdict.message : "", /MCP_ALLOWED_ORIGINS/);
  }
});

Deno.test("Host guard rejects a foreign Origin naming MCP_ALLOWED_ORIGINS", () => {
  assert.deepEqual(loopback(request({ host: "localhost:8787", origin: "https://evil.example" })), {
    ok: false,
    status: 403,
    message: 'Origin "https://evil.example" is not allowed; add it to MCP_ALLOWED_ORIGINS',
  });
});

Deno.test("Host guard rejects the null Origin", () => {
  assert.equal(loopback(request({ host: "localhost", origin: "null" })).ok, false);
});

Deno.test("Host guard rejects a non-http Origin on an allowed host", () => {
  assert.equal(loopback(request({ host: "localhost", origin: "file://localhost" })).ok, false);
});

Deno.test("Host guard accepts an Origin listed in allowedOrigins", () => {
  const guard = createHostGuard({
    host: "127.0.0.1",
    port: 8787,
    allowedOrigins: ["https://app.example/"],
  });
  assert.deepEqual(guard(request({ host: "localhost", origin: "https://app.example" })), {
    ok: true,
  });
});

Deno.test("Host guard extends the loopback names with allowedHosts on a loopback bind", () => {
  const guard = createHostGuard({ host: "127.0.0.1", port: 8787, allowedHosts: ["dev.local"] });
  assert.deepEqual(guard(request({ host: "dev.local:8787" })), { ok: true });
  assert.deepEqual(guard(request({ host: "localhost" })), { ok: true });
});

Deno.test("Host guard on a non-loopback bind accepts only the bound host and allowedHosts", () => {
  const guard = createHostGuard({
    host: "0.0.0.0",
    port: 8787,
    allowedHosts: ["gateway.example", "proxy.example:8443"],
  });
  assert.deepEqual(guard(request({ host: "gateway.example" })), { ok: true });
  assert.deepEqual(guard(request({ host: "gateway.example:8787" })), { ok: true });
  assert.deepEqual(guard(request({ host: "proxy.example:8443" })), { ok: true });
  assert.equal(guard(request({ host: "proxy.example" })).ok, false);
  assert.equal(guard(request({ host: "localhost:8787" })).ok, false);
  assert.equal(guard(request({ host: "0.0.0.0:8787" })).ok, false);
  assert.deepEqual(guard(request({ host: "gateway.example", origin: "https://gateway.example" })), {
    ok: true,
  });
  const denied = guard(request({ host: "evil.example" }));
  assert.match(!denied.ok ? denied.message : "", /connect to http:\/\/gateway\.example:8787 /);
});

Deno.test("Host guard on a wildcard bind without allowedHosts accepts loopback names only", () => {
  const guard = createHostGuard({ host: "0.0.0.0", port: 8787 });
  assert.deepEqual(guard(request({ host: "localhost:8787" })), { ok: true });
  assert.equal(guard(request({ host: "192.168.1.5:8787" })).ok, false);
});

Deno.test("Host guard accepts an IPv6 bound host in brackets", () => {
  const guard = createHostGuard({ host: "fd00::5", port: 8787, allowedHosts: [] });
  assert.deepEqual(guard(request({ host: "[fd00::5]:8787" })), { ok: true });
});
