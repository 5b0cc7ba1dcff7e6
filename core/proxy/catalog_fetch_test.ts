import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { ManualClock } from "../support/clock.ts";
import {
  CatalogLimitError,
  type CatalogLimits,
  DEFAULT_CATALOG_LIMITS,
  fetchCatalog,
} from "./catalog_fetch.ts";

const schema = { type: "object", properties: {} };

/** A real SDK server in process whose lists come from `lists`, and a client linked to it. */
async function linked(lists: {
  tools?: (page: number) => { tools: unknown[]; nextCursor?: string };
  resources?: unknown[];
  prompts?: unknown[];
}) {
  const server = new Server({ name: "catalog", version: "1.0.0" }, {
    capabilities: { tools: {}, resources: {}, prompts: {} },
  });
  server.setRequestHandler(
    ListToolsRequestSchema,
    (request) => (lists.tools?.(Number(request.params?.cursor ?? 0)) ?? { tools: [] }) as never,
  );
  server.setRequestHandler(
    ListResourcesRequestSchema,
    () => ({ resources: lists.resources ?? [] }) as never,
  );
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: [] }));
  server.setRequestHandler(
    ListPromptsRequestSchema,
    () => ({ prompts: lists.prompts ?? [] }) as never,
  );
  const [a, b] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: "test", version: "1.0.0" });
  await Promise.all([server.connect(a), client.connect(b)]);
  return {
    client,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

function options(limits: Partial<CatalogLimits> = {}) {
  const clock = new ManualClock();
  const dropped: string[] = [];
  return {
    dropped,
    value: {
      server: "up",
      limits: { ...DEFAULT_CATALOG_LIMITS, ...limits },
      deadline: clock.now() + 60_000,
      callMs: 60_000,
      clock,
      onDrop: (kind: string, name: string, reason: string) =>
        dropped.push(`${kind} ${name}: ${reason}`),
    },
  };
}

Deno.test("A catalog within its limits is read whole, across pages", async () => {
  const up = await linked({
    tools: (page) => ({
      tools: [{ name: `t${page}`, inputSchema: schema }],
      ...(page < 2 ? { nextCursor: String(page + 1) } : {}),
    }),
    resources: [{ uri: "file:///a", name: "a" }],
    prompts: [{ name: "p" }],
  });
  try {
    const catalog = await fetchCatalog(up.client, options().value);
    assert.deepEqual(catalog.tools.map((t) => t.name), ["t0", "t1", "t2"]);
    assert.equal(catalog.resources.length, 1);
    assert.equal(catalog.prompts.length, 1);
  } finally {
    await up.close();
  }
});

Deno.test("More items than limits.items in one list fails naming limits.items", async () => {
  const up = await linked({
    tools: () => ({
      tools: Array.from({ length: 11 }, (_, i) => ({ name: `t${i}`, inputSchema: schema })),
    }),
  });
  try {
    await assert.rejects(
      fetchCatalog(up.client, options({ items: 10 }).value),
      (error) =>
        error instanceof CatalogLimitError && error.bound === "limits.items" &&
        /more than limits\.items \(10\) in tools\/list/.test(error.message),
    );
  } finally {
    await up.close();
  }
});

Deno.test("A catalog larger than limits.catalog_bytes fails naming it", async () => {
  const up = await linked({
    tools: () => ({
      tools: Array.from({ length: 50 }, (_, i) => ({
        name: `t${i}`,
        description: "d".repeat(1000),
        inputSchema: schema,
      })),
    }),
  });
  try {
    await assert.rejects(
      fetchCatalog(up.client, options({ catalogBytes: 10_000 }).value),
      (error) => error instanceof CatalogLimitError && error.bound === "limits.catalog_bytes",
    );
  } finally {
    await up.close();
  }
});

Deno.test("An oversized or deep resource or prompt is dropped naming the bound; the rest are kept", async () => {
  let deep: Record<string, unknown> = {};
  for (let i = 0; i < 40; i++) deep = { a: deep };
  const up = await linked({
    resources: [
      { uri: "file:///ok", name: "ok" },
      { uri: "file:///big", name: "big", description: "x".repeat(100_000) },
    ],
    prompts: [{ name: "fine" }, { name: "deep", _meta: deep }],
  });
  const { value, dropped } = options();
  try {
    const catalog = await fetchCatalog(up.client, value);
    assert.deepEqual(catalog.resources.map((r) => r.name), ["ok"]);
    assert.deepEqual(catalog.prompts.map((p) => p.name), ["fine"]);
    assert.match(dropped.join("\n"), /resource big: it is \d+ bytes, over limits\.schema_bytes/);
    assert.match(
      dropped.join("\n"),
      /prompt deep: it nests deeper than limits\.schema_depth \(32\)/,
    );
  } finally {
    await up.close();
  }
});

Deno.test("A deadline already passed fails naming timeouts.connect, without waiting", async () => {
  const up = await linked({ tools: () => ({ tools: [] }) });
  const { value } = options();
  try {
    await assert.rejects(
      fetchCatalog(up.client, { ...value, deadline: value.clock.now() - 1 }),
      (error) => error instanceof CatalogLimitError && error.bound === "timeouts.connect",
    );
  } finally {
    await up.close();
  }
});

Deno.test("An upstream that stops answering mid-catalog fails at the deadline, naming timeouts.connect", async () => {
  let reached!: () => void;
  const secondPage = new Promise<void>((resolve) => reached = resolve);
  const up = await linked({
    tools: (page) => {
      if (page === 0) return { tools: [{ name: "t0", inputSchema: schema }], nextCursor: "1" };
      reached();
      return new Promise<never>(() => {}) as never;
    },
  });
  const { value } = options();
  try {
    const fetching = fetchCatalog(up.client, value);
    await secondPage;
    value.clock.advance(60_000);
    await assert.rejects(
      fetching,
      (error) => error instanceof CatalogLimitError && error.bound === "timeouts.connect",
    );
  } finally {
    await up.close();
  }
});
