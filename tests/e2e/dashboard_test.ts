/**
 * The operator dashboard in a real headless Chromium (Debian's `chromium`, driven by
 * playwright-core): sign in with a token, watch the fleet change live, decide approvals.
 *
 * Set `DASHBOARD_SCREENSHOT=docs/dashboard.png` to refresh the screenshot in docs/operator-api.md; otherwise the
 * screenshot goes to a temp dir, so a test run never dirties the working tree.
 */
import assert from "node:assert/strict";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { needsBinary } from "../support/needs_binary.ts";
import { APPROVAL_TOKEN_META_KEY } from "../../core/governance/tool_governance.ts";
import { faultServer, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";

const CHROMIUM = "/usr/bin/chromium";
/** Chromium is Debian's, not the project's: ignored without it (one line says so) unless CI is set. */
const NEEDS_CHROMIUM = needsBinary("chromium", [CHROMIUM], "apt-get install -y chromium");
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const OPERATOR_TOKEN = "dashboard-operator-token";
const AGENT_TOKEN = "dashboard-agent-token";
const ACME_AGENT_TOKEN = "dashboard-acme-agent-token";
const ACME_APPROVER_TOKEN = "dashboard-acme-approver-token";
const ACME_OPERATOR_TOKEN = "dashboard-acme-operator-token";

/** A fleet entry for the fault fixture (healthy, checked every 2 s), with extra YAML lines. */
function checkedServer(id: string, extra = ""): string {
  return faultServer(id, { extra: `    health: { interval: 2 }\n${extra}` });
}

/** b__ok needs approval; an operator (no MCP use) and an agent (no operator scope) token. */
const POLICY = `
tenants:
  "*":
    effects:
      b__ok: destructive
    approval: [destructive]
`;

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function withDashboardGateway(fn: (gateway: TestGateway) => Promise<void>): Promise<void> {
  // `a` trips its breaker on the first failure and waits a minute to restart: it stays down.
  const fleet = await writeFleet(
    `proxy_servers:${checkedServer("a", "    breaker: { threshold: 1, base: 60, max: 120 }\n")}${
      checkedServer("b")
    }`,
  );
  await Deno.writeTextFile(`${fleet.dir}/policy.yaml`, POLICY);
  await Deno.writeTextFile(
    `${fleet.dir}/tokens.yaml`,
    `tokens:
  - sha256: ${await sha256(OPERATOR_TOKEN)}
    tenant: ops
    scopes: [operator, approver, all_tenants]
    subject: on-call
  - sha256: ${await sha256(AGENT_TOKEN)}
    tenant: default
    scopes: [mcp]
    subject: agent-7
  - sha256: ${await sha256(ACME_AGENT_TOKEN)}
    tenant: acme
    scopes: [mcp]
    subject: acme-agent
  - sha256: ${await sha256(ACME_APPROVER_TOKEN)}
    tenant: acme
    scopes: [approver]
    subject: acme-approver
  - sha256: ${await sha256(ACME_OPERATOR_TOKEN)}
    tenant: acme
    scopes: [operator, approver]
    subject: acme-operator
`,
  );
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: `${fleet.dir}/policy.yaml`,
    MCP_AUTH_TOKENS_FILE: `${fleet.dir}/tokens.yaml`,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway);
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
}

async function withBrowser(fn: (page: Page) => Promise<void>): Promise<void> {
  try {
    await Deno.stat(CHROMIUM);
  } catch {
    throw new Error(
      `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium), as .ci/run does`,
    );
  }
  const profile = await Deno.makeTempDir({ prefix: "agent33-chromium-" });
  let context: BrowserContext | undefined;
  try {
    // A persistent context runs Chromium with --user-data-dir=<profile>: a fresh profile per test.
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1360, height: 900 },
      colorScheme: "light",
    });
    context.setDefaultTimeout(20_000);
    const page = context.pages()[0] ?? await context.newPage();
    await fn(page);
  } finally {
    await context?.close();
    await Deno.remove(profile, { recursive: true });
  }
}

const row = (page: Page, server: string, attrs = "") =>
  page.locator(`#fleet tr[data-server="${server}"]${attrs}`);

Deno.test("The dashboard's page is public, but the data it shows needs an operator token", async () => {
  await withDashboardGateway(async (gateway) => {
    const page = await fetch(`${gateway.url}/dashboard`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type")!, /^text\/html/);
    assert.match(page.headers.get("content-security-policy")!, /script-src 'self'/);
    assert.match(await page.text(), /<script src="\/dashboard\/app\.js" defer><\/script>/);
    for (const asset of ["app.js", "style.css"]) {
      const response = await fetch(`${gateway.url}/dashboard/${asset}`);
      assert.equal(response.status, 200, asset);
      await response.body?.cancel();
    }
    for (const path of ["/dashboard/kernel.ts", "/dashboard/%2e%2e/dashboard.ts"]) {
      const response = await fetch(`${gateway.url}${path}`);
      assert.equal(response.status, 404, path);
      await response.body?.cancel();
    }
    // Data routes: no token, a token in the URL, or a token without operator scope get nothing.
    for (
      const [path, headers, status] of [
        ["/v1/events", {}, 401],
        [`/v1/events?access_token=${OPERATOR_TOKEN}`, {}, 401],
        ["/v1/events", { Authorization: `Bearer ${AGENT_TOKEN}` }, 403],
        ["/v1/operator/status", {}, 401],
        ["/v1/approvals?status=pending", {}, 401],
      ] as const
    ) {
      const response = await fetch(`${gateway.url}${path}`, { headers });
      assert.equal(response.status, status, path);
      await response.body?.cancel();
    }
  });
});

Deno.test(
  "The dashboard shows the fleet live, turns a killed upstream FAILED without a reload, and approves a pending call",
  NEEDS_CHROMIUM,
  async () => {
    await withDashboardGateway(async (gateway) => {
      await withBrowser(async (page) => {
        const pageErrors: string[] = [];
        page.on("pageerror", (error) => pageErrors.push(error.message));

        // Sign in once; the token stays in this tab's sessionStorage.
        await page.goto(`${gateway.url}/dashboard`);
        await page.fill("#token", OPERATOR_TOKEN);
        await page.click("#connect");
        await row(page, "a", '[data-state="READY"]').waitFor();
        await row(page, "b", '[data-state="READY"]').waitFor();
        await page.locator('#live[data-state="live"]').waitFor();
        assert.equal(await row(page, "b").locator(".cell-tools").textContent(), "16");
        assert.equal(
          await page.evaluate(() => sessionStorage.getItem("agent33.dashboard.token")),
          OPERATOR_TOKEN,
        );

        // Kill a's child: its row turns FAILED with the breaker OPEN, pushed over /v1/events.
        await page.evaluate(() => Object.assign(globalThis, { sameDocument: true }));
        const pid = Number(
          /upstream started server=a pid=(\d+)/.exec(gateway.logs.join("\n"))?.[1],
        );
        assert.ok(pid > 0, "the child's pid is logged");
        Deno.kill(pid, "SIGKILL");
        await row(page, "a", '[data-state="FAILED"][data-breaker="OPEN"]').waitFor();
        assert.match(
          (await row(page, "a").textContent())!,
          /closed the connection/,
          "the last error is shown",
        );
        await row(page, "b", '[data-state="READY"]').waitFor();
        await page.locator('#events li[data-type="proxy.state"]', { hasText: "a: READY → FAILED" })
          .waitFor();
        assert.equal(
          await page.evaluate(() => (globalThis as { sameDocument?: boolean }).sameDocument),
          true,
          "the page was not reloaded",
        );

        // A call that needs approval shows up as pending, live.
        const agent = await connectHttp(gateway, AGENT_TOKEN);
        try {
          const refused = await agent.callTool({ name: "b__ok", arguments: {} })
            .then(() => assert.fail("b__ok must need approval"), (e: McpError) => e);
          assert.equal((refused.data as { code: string }).code, "approval_required");
          const { id } = (refused.data as { request: { id: string } }).request;
          const card = page.locator(`#approvals li[data-approval="${id}"]`);
          await card.waitFor();
          assert.match((await card.textContent())!, /b__ok[\s\S]*default \/ agent-7/);

          await row(page, "b").locator(".health-dot.ok").waitFor(); // a health check has run
          await screenshot(page);

          // Approve on the page; the caller fetches its token from the API and retries.
          const mine = await decideOnPage(page, gateway, id, "Approve", AGENT_TOKEN);
          await page.locator('#events li[data-type="approval.approved"]').waitFor();
          assert.equal(mine.status, "approved");
          const done = await agent.callTool({
            name: "b__ok",
            arguments: {},
            _meta: { [APPROVAL_TOKEN_META_KEY]: mine.token },
          });
          assert.deepEqual(done.content, [{ type: "text", text: "ok" }]);

          // Deny works the same way, and the caller learns it.
          const again = await agent.callTool({ name: "b__ok", arguments: {} })
            .catch((e: McpError) => e) as McpError;
          const second = (again.data as { request: { id: string } }).request.id;
          const denied = await decideOnPage(page, gateway, second, "Deny", AGENT_TOKEN);
          assert.equal(denied.status, "denied");
        } finally {
          await agent.close();
        }

        // Phone width: nothing overflows sideways.
        await page.setViewportSize({ width: 390, height: 844 });
        // A string: this module is type-checked without the DOM library.
        const overflow = Number(
          await page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth",
          ),
        );
        assert.ok(overflow <= 0, `the page overflows a phone's width by ${overflow} px`);
        assert.deepEqual(pageErrors, []);
      });
    });
  },
);

Deno.test(
  "A tenant's approver or operator sees that tenant's approvals on the dashboard, decides them, and is told why the fleet is hidden",
  NEEDS_CHROMIUM,
  async () => {
    await withDashboardGateway(async (gateway) => {
      const acme = await connectHttp(gateway, ACME_AGENT_TOKEN);
      const other = await connectHttp(gateway, AGENT_TOKEN);
      try {
        const file = async (client: typeof acme) => {
          const refused = await client.callTool({ name: "b__ok", arguments: {} })
            .then(() => assert.fail("b__ok must need approval"), (e: McpError) => e);
          return (refused.data as { request: { id: string } }).request.id;
        };
        const theirs = await file(other);
        await withBrowser(async (page) => {
          const pageErrors: string[] = [];
          page.on("pageerror", (error) => pageErrors.push(error.message));
          const signIn = async (token: string) => {
            await page.goto(`${gateway.url}/dashboard`);
            await page.fill("#token", token);
            await page.click("#connect");
          };

          // An approver of acme: no event stream, so the page polls; the fleet's panels are gone.
          await signIn(ACME_APPROVER_TOKEN);
          await page.locator('#live[data-state="polling"]').waitFor();
          assert.match((await page.locator("#scope-note").textContent())!, /scope operator/);
          assert.equal(await page.locator("#fleet").isVisible(), false);
          const mine = await file(acme);
          const card = page.locator(`#approvals li[data-approval="${mine}"]`);
          await card.waitFor(); // by the poll
          assert.match((await card.textContent())!, /acme \/ acme-agent/);
          assert.equal(await page.locator(`#approvals li[data-approval="${theirs}"]`).count(), 0);
          const decided = await decideOnPage(page, gateway, mine, "Approve", ACME_AGENT_TOKEN);
          assert.equal(decided.status, "approved");

          // An operator of acme: its tenant's events live, the fleet hidden with the reason.
          await page.click("#signout");
          await signIn(ACME_OPERATOR_TOKEN);
          await page.locator('#live[data-state="live"]').waitFor();
          assert.match(
            (await page.locator("#scope-note").textContent())!,
            /operator of tenant "acme" only[\s\S]*all_tenants/,
          );
          const next = await file(acme);
          await page.locator(`#approvals li[data-approval="${next}"]`).waitFor();
          await page.locator('#events li[data-type="approval.requested"]').first().waitFor();
          assert.equal(await page.locator(`#approvals li[data-approval="${theirs}"]`).count(), 0);

          // A client token reaches none of it: signed out, saying so, and nothing stays shown.
          await page.click("#signout");
          assert.equal(await page.locator("#events li, #approvals li").count(), 0);
          await signIn(AGENT_TOKEN);
          await page.locator("#login-error").waitFor();
          assert.match(
            (await page.locator("#login-error").textContent())!,
            /may not use the dashboard/,
          );
          assert.deepEqual(pageErrors, []);
        });
      } finally {
        await acme.close();
        await other.close();
      }
    });
  },
);

/**
 * Clicks Approve or Deny on request `id`'s card, waits for the card to go, and returns the
 * request as its requester (`token`) then reads it.
 */
async function decideOnPage(
  page: Page,
  gateway: TestGateway,
  id: string,
  action: "Approve" | "Deny",
  token: string,
): Promise<{ status: string; token?: string }> {
  const card = page.locator(`#approvals li[data-approval="${id}"]`);
  await card.getByRole("button", { name: `${action} b__ok` }).click();
  await card.waitFor({ state: "detached" });
  const response = await fetch(`${gateway.url}/v1/approvals/${id}`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  return await response.json();
}

/** Full-page screenshot: to $DASHBOARD_SCREENSHOT when set, else to a temp file. */
async function screenshot(page: Page): Promise<void> {
  const target = Deno.env.get("DASHBOARD_SCREENSHOT");
  if (target) {
    await page.screenshot({ path: target, fullPage: true, animations: "disabled" });
    return;
  }
  const dir = await Deno.makeTempDir({ prefix: "agent33-shot-" });
  try {
    await page.screenshot({ path: `${dir}/dashboard.png`, fullPage: true, animations: "disabled" });
    assert.ok((await Deno.stat(`${dir}/dashboard.png`)).size > 10_000);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A fake Kubernetes API: the list holds `tools/weather`; the watch stays open for `push`. */
function liveKubernetes() {
  const encoder = new TextEncoder();
  const watches: ReadableStreamDefaultController<Uint8Array>[] = [];
  const annotated = (namespace: string, name: string, version: string) => ({
    metadata: {
      name,
      namespace,
      resourceVersion: version,
      annotations: { "agent33.io/mcp": "true" },
    },
    spec: { ports: [{ port: 8080 }] },
  });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    if (new URL(request.url).searchParams.get("watch") !== "1") {
      return Response.json({
        kind: "ServiceList",
        metadata: { resourceVersion: "1" },
        items: [annotated("tools", "weather", "1")],
      });
    }
    return new Response(new ReadableStream({ start: (c) => void watches.push(c) }));
  });
  return {
    api: `http://127.0.0.1:${server.addr.port}`,
    /** Sends a watch event adding a Service to every open watch. */
    add(namespace: string, name: string) {
      const line = JSON.stringify({ type: "ADDED", object: annotated(namespace, name, "2") });
      for (const c of watches) c.enqueue(encoder.encode(line + "\n"));
    },
    async close() {
      for (const c of watches) {
        try {
          c.close();
        } catch { /* the client let go already */ }
      }
      await server.shutdown();
    },
  };
}

Deno.test(
  "The dashboard shows discovered servers live and adds one to the fleet with a click, writing exactly its proposed yaml",
  NEEDS_CHROMIUM,
  async () => {
    const fake = liveKubernetes();
    const fleet = await writeFleet("# mine\nproxy_servers:\n");
    Deno.env.set("MCP_K8S_API", fake.api);
    const gateway = await startGateway({
      MCP_PROXY_CONFIG_PATH: fleet.path,
      MCP_DISCOVERY: "k8s",
    });
    try {
      await withBrowser(async (page) => {
        const pageErrors: string[] = [];
        page.on("pageerror", (error) => pageErrors.push(error.message));
        await page.goto(`${gateway.url}/dashboard`);
        // Adding a server changes the gateway: the admin (operator) token's scope.
        await page.fill("#token", gateway.adminToken);
        await page.click("#connect");
        await page.locator('#live[data-state="live"]').waitFor();
        await page.locator('#candidates li[data-proposal="add:k8s-tools-weather"]').waitFor();
        assert.match(
          (await page.locator("#candidates-running").textContent())!,
          /running: discovery-k8s/,
        );

        // A watch event: the new Service shows without a reload.
        fake.add("ml", "search");
        const card = page.locator('#candidates li[data-proposal="add:k8s-ml-search"]');
        await card.waitFor();
        const shown = await card.locator("pre").textContent();
        const listed = await (await fetch(`${gateway.url}/v1/mcp/sync/proposals`, {
          headers: { Authorization: `Bearer ${gateway.adminToken}` },
        })).json();
        const proposal = listed.proposals.find((p: { id: string }) => p.id === "add:k8s-ml-search");
        assert.equal(shown, proposal.yaml, "the card shows exactly what will be written");

        const before = await Deno.readTextFile(fleet.path);
        const sent = page.waitForRequest((r) => r.url().endsWith("/v1/mcp/sync/apply"));
        await card.getByRole("button", { name: "Add k8s-ml-search to the fleet" }).click();
        // The click is bound to the card shown: the gateway refuses it if the id changed meaning.
        assert.deepEqual((await sent).postDataJSON(), {
          ids: ["add:k8s-ml-search"],
          digests: { "add:k8s-ml-search": proposal.digest },
        });
        await card.waitFor({ state: "detached" });
        const indent = (yaml: string) =>
          yaml.trimEnd().split("\n").map((line) => `  ${line}`).join("\n") + "\n";
        assert.equal(await Deno.readTextFile(fleet.path), before + indent(proposal.yaml));
        await page.locator('#events li[data-type="fleet.reloaded"]').waitFor();
        // The other candidate is still proposed.
        await page.locator('#candidates li[data-proposal="add:k8s-tools-weather"]').waitFor();
        assert.deepEqual(pageErrors, []);
      });
    } finally {
      await gateway.stop();
      Deno.env.delete("MCP_K8S_API");
      await fake.close();
      await fleet.remove();
    }
  },
);
