/**
 * Bench: `tools/list` over a large aggregated fleet (50 upstreams × 100 tools = 5,000 tools), in
 * process: real SDK servers as upstreams over in-memory transports, the real bridge with the shipped
 * page size (MCP_LIST_PAGE_SIZE's default), and the SDK client listing as a client does: following
 * `nextCursor` until the last page; the round trips that took are reported. Cold = the first list
 * after the fleet changed; cached = the lists after it.
 * @module
 */
import { principalOf } from "../core/auth/token_payload.ts";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { MCPServiceBridge } from "../core/mcp/bridge.ts";
import { CallPipeline } from "../core/mcp/call_pipeline.ts";
import { systemClock } from "../core/support/clock.ts";
import { DefinitionRegistry } from "../core/mcp/definition_registry.ts";
import { InProcessEventBus } from "../core/bus/event_bus.ts";
import { ApprovalQueue } from "../core/governance/approval_queue.ts";
import { ApprovalTokens } from "../core/governance/approval_tokens.ts";
import { AuditLog } from "../core/governance/audit_log.ts";
import { MemoryNonceStore } from "../core/governance/nonce_store.ts";
import { DEFAULT_POLICY } from "../core/governance/policy_loader.ts";
import { RateLimiter } from "../core/governance/rate_limiter.ts";
import { ToolGovernance } from "../core/governance/tool_governance.ts";
import { silentLogger } from "../core/support/logger.ts";
import { ProxyManager } from "../core/proxy/proxy_manager.ts";
import { ToolActivationManager } from "../core/mcp/tool_activation_manager.ts";
import { ToolDiscovery } from "../core/mcp/tool_discovery.ts";
import { ToolRegistry } from "../core/mcp/tool_registry.ts";
import { DEFAULT_PAGE_SIZE } from "../core/config/config.ts";
import { serializeMessage } from "../core/support/wire_json.ts";
import { fleetServer, InMemoryUpstream } from "../tests/support/in_memory_upstream.ts";
import { median, quantile } from "./stats.ts";

/** Latency of one full tools/list, cold and from cache. */
export interface ToolsListResult {
  upstreams: number;
  toolsPerUpstream: number;
  tools: number;
  /** The shipped page size the lists were served with. */
  pageSize: number;
  /** Requests one full list took (pages followed through nextCursor). */
  roundTrips: number;
  coldMs: number;
  cachedMedianMs: number;
  cachedP99Ms: number;
  /** The gateway's own part: a raw request in, the response serialized (no SDK client parse). */
  leanCachedMedianMs: number;
  leanCachedP99Ms: number;
}

/** Measures tools/list over `upstreams` × `toolsPerUpstream` tools, `calls` cached lists. */
export async function benchToolsList(
  upstreams: number,
  toolsPerUpstream: number,
  calls: number,
): Promise<ToolsListResult> {
  const clock = systemClock;
  const bus = new InProcessEventBus();
  const tools = new ToolRegistry();
  const sources = new Map<string, InMemoryUpstream>();
  const proxy = new ProxyManager({
    createTransport: (server) => sources.get(server.id)!.connect(),
    isNativeTool: (name) => tools.has(name),
    separator: "__",
    clock,
    logger: silentLogger,
    bus,
  });
  const tokens = new ApprovalTokens({
    secret: crypto.getRandomValues(new Uint8Array(32)),
    clock,
    nonces: new MemoryNonceStore({ clock }),
  });
  const approvals = new ApprovalQueue({ clock, bus, tokens });
  const audit = new AuditLog({ bus, clock, logger: silentLogger });
  const governance = new ToolGovernance({
    policies: DEFAULT_POLICY,
    tokens,
    approvals,
    rateLimiter: new RateLimiter({ clock }),
    audit,
    clock,
  });
  const bridge = new MCPServiceBridge({
    toolRegistry: tools,
    agentRegistry: new DefinitionRegistry(),
    skillRegistry: new DefinitionRegistry(),
    workflowRegistry: new DefinitionRegistry(),
    logger: silentLogger,
    clock,
    bus,
    pageSize: DEFAULT_PAGE_SIZE,
    proxy,
    pipeline: new CallPipeline({ tools, proxy, governance, approvals }),
    approvalInBand: false,
    discovery: new ToolDiscovery({
      governance,
      activation: new ToolActivationManager(),
      defaultMode: "legacy",
    }),
  });
  const servers = Array.from({ length: upstreams }, (_, i) => {
    const id = `s${String(i).padStart(2, "0")}`;
    sources.set(
      id,
      new InMemoryUpstream(
        Array.from({ length: toolsPerUpstream }, (_, j) => `tool_${String(j).padStart(3, "0")}`),
      ),
    );
    return fleetServer(id);
  });
  await proxy.start(servers);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await bridge.serve(serverSide, {
    transport: "bench",
    auth: {
      tenant: "default",
      scopes: [],
      subject: "bench",
      principal: principalOf("stdio", "bench"),
    },
  });
  const client = new Client({ name: "bench", version: "1" });
  await client.connect(clientSide);
  const listAll = async () => {
    let count = 0;
    let roundTrips = 0;
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      roundTrips++;
      count += page.tools.length;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return { count, roundTrips };
  };
  try {
    const started = performance.now();
    const first = await listAll();
    const coldMs = performance.now() - started;
    const expected = upstreams * toolsPerUpstream;
    if (first.count !== expected) {
      throw new Error(`tools/list returned ${first.count} tools, expected ${expected}`);
    }
    const samples: number[] = [];
    for (let i = 0; i < calls; i++) {
      const t = performance.now();
      await listAll();
      samples.push(performance.now() - t);
    }
    samples.sort((a, b) => a - b);
    const lean = await leanLists(bridge, expected, calls);
    return {
      upstreams,
      toolsPerUpstream,
      tools: expected,
      pageSize: DEFAULT_PAGE_SIZE,
      roundTrips: first.roundTrips,
      coldMs,
      cachedMedianMs: median(samples),
      cachedP99Ms: quantile(samples, 0.99),
      leanCachedMedianMs: median(lean),
      leanCachedP99Ms: quantile(lean, 0.99),
    };
  } finally {
    await client.close();
    await bridge.close();
    await proxy.stop();
    await audit.close();
  }
}

/**
 * Times `calls` cached tools/list on a second session with no SDK client: a raw request in, and
 * the response serialized to JSON text as a wire transport would (the lean client's view).
 */
async function leanLists(bridge: MCPServiceBridge, expected: number, calls: number) {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const served = await bridge.serve(serverSide, {
    transport: "bench",
    auth: {
      tenant: "default",
      scopes: [],
      subject: "bench-lean",
      principal: principalOf("stdio", "bench-lean"),
    },
  });
  let answer: ((text: string) => void) | undefined;
  clientSide.onmessage = (message) => answer?.(serializeMessage(message));
  await clientSide.start();
  const list = async (id: number) => {
    const text = new Promise<string>((resolve) => answer = resolve);
    await clientSide.send({ jsonrpc: "2.0", id, method: "tools/list", params: {} });
    return await text;
  };
  try {
    const first = JSON.parse(await list(0)) as { result?: { tools?: unknown[] } };
    if (first.result?.tools?.length !== expected) {
      throw new Error(`lean tools/list returned ${first.result?.tools?.length} tools`);
    }
    const samples: number[] = [];
    for (let i = 1; i <= calls; i++) {
      const t = performance.now();
      await list(i);
      samples.push(performance.now() - t);
    }
    return samples.sort((a, b) => a - b);
  } finally {
    await served.close();
  }
}
