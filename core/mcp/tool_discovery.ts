/**
 * Progressive tool discovery (`tool_discovery_mode: search`): instead of every tool, a session
 * lists the native tools and three meta-tools — `tool_search`, `tool_activate`,
 * `tool_deactivate` — and the tools it activated. Search and activation only ever see tools the
 * tenant may call on servers that are serving.
 * @module
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../support/errors.ts";
import { effectClassOf } from "../governance/tool_governance.ts";
import type { CallContext, ToolGovernance } from "../governance/tool_governance.ts";
import type { ToolActivationManager } from "./tool_activation_manager.ts";
import { ToolSearchIndex } from "./tool_search.ts";

/** How a session discovers tools. */
export type DiscoveryMode = "legacy" | "search";

/** A tool a session could use: its descriptor and the upstream it comes from (if any). */
export interface Candidate {
  tool: Tool;
  server?: string;
  /** The scanner's escalation of the tool (call_pipeline.ts): governed as destructive. */
  escalation?: string;
}

/** Input and annotations shared by tool_activate and tool_deactivate. */
const BY_NAMES: Pick<Tool, "inputSchema" | "annotations"> = {
  inputSchema: {
    type: "object",
    properties: {
      names: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 50 },
    },
    required: ["names"],
    additionalProperties: false,
  },
  annotations: {
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
};

/** The meta-tools of search mode. */
export const DISCOVERY_TOOLS: readonly Tool[] = [
  {
    name: "tool_search",
    title: "Search tools",
    description:
      "Finds tools by what they do. Returns the best matches with their server, a one-line description and effect class (read, write, destructive); activate the ones you need with tool_activate.",
    inputSchema: {
      type: "object",
      properties: {
        query: { type: "string", description: "What you want to do, in words" },
        k: {
          type: "integer",
          minimum: 1,
          maximum: 50,
          description: "How many results (default 8)",
        },
      },
      required: ["query"],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: "tool_activate",
    title: "Activate tools",
    description: "Adds tools (by the names tool_search returned) to this session's tool list.",
    ...BY_NAMES,
  },
  {
    name: "tool_deactivate",
    title: "Deactivate tools",
    description: "Removes tools from this session's tool list.",
    ...BY_NAMES,
  },
];

const META = new Set(DISCOVERY_TOOLS.map((t) => t.name));

/** The discovery side of one session. */
export class ToolDiscovery {
  #governance: ToolGovernance;
  #activation: ToolActivationManager;
  #defaultMode: DiscoveryMode;
  /** Indexes by candidate set (tenants differ): a few kept, the oldest dropped. */
  #indexes = new Map<string, ToolSearchIndex>();

  constructor(options: {
    governance: ToolGovernance;
    activation: ToolActivationManager;
    defaultMode: DiscoveryMode;
  }) {
    this.#governance = options.governance;
    this.#activation = options.activation;
    this.#defaultMode = options.defaultMode;
  }

  /** The tenant's mode: its policy's `discovery`, else the gateway default. */
  mode(tenant: string): DiscoveryMode {
    return this.#policy(tenant)?.discovery ?? this.#defaultMode;
  }

  /** Whether a name is one of the meta-tools. */
  isMetaTool(name: string): boolean {
    return META.has(name);
  }

  /** What a search-mode session lists: natives, meta-tools, then always-active and activated tools. */
  list(
    session: string,
    ctx: CallContext,
    natives: readonly Tool[],
    proxied: readonly Candidate[],
  ): Tool[] {
    const always = this.#policy(ctx.tenant)?.alwaysActive ?? [];
    const shown = proxied.filter(({ tool }) =>
      this.#activation.isActive(session, tool.name) || always.some((r) => r.match(tool.name))
    ).map((c) => c.tool);
    return [...natives, ...DISCOVERY_TOOLS, ...shown];
  }

  /** Runs a meta-tool; `changed` is true when the session's tool list changed. */
  call(
    session: string,
    ctx: CallContext,
    name: string,
    args: Record<string, unknown>,
    candidates: readonly Candidate[],
  ): { result: CallToolResult; changed: boolean } {
    const callable = candidates.filter((c) =>
      this.#governance.visible(ctx, {
        name: c.tool.name,
        descriptor: c.tool,
        ...(c.server ? { server: c.server } : {}),
        ...(c.escalation === undefined ? {} : { escalation: c.escalation }),
      })
    );
    if (name === "tool_search") {
      const query = String(args.query ?? "");
      const k = typeof args.k === "number" ? args.k : 8;
      const policy = this.#policy(ctx.tenant);
      const results = this.#search(callable, query, k).map(({ tool, server, escalation }) => ({
        name: tool.name,
        ...(server ? { server } : {}),
        description: oneLine(tool.description ?? tool.title ?? ""),
        // The effect class the call pipeline governs it by, scanner escalation included.
        effect: effectClassOf(
          { name: tool.name, annotations: tool.annotations, server, escalation },
          this.#governance.policies,
          policy,
        ).effect,
        active: this.#activation.isActive(session, tool.name),
      }));
      return {
        result: {
          content: [{ type: "text", text: JSON.stringify(results, null, 2) }],
          structuredContent: { results },
        },
        changed: false,
      };
    }
    const names = (args.names as string[]) ?? [];
    if (name === "tool_activate") {
      const known = new Set(callable.map((c) => c.tool.name));
      const unknown = names.filter((n) => !known.has(n));
      if (unknown.length > 0) {
        throw new GatewayError(
          "unknown_tool",
          `Cannot activate ${
            unknown.map((n) => `"${n}"`).join(", ")
          }: not a tool this tenant may call on a serving server; use tool_search for names`,
          { tools: unknown },
        );
      }
      const { added, evicted } = this.#activation.activate(session, names);
      return {
        result: text(
          `Active now: ${names.join(", ")}` +
            (evicted.length ? `; deactivated to make room: ${evicted.join(", ")}` : ""),
        ),
        changed: added.length > 0,
      };
    }
    const removed = this.#activation.deactivate(session, names);
    return {
      result: text(
        removed.length ? `Deactivated: ${removed.join(", ")}` : "None of them was active",
      ),
      changed: removed.length > 0,
    };
  }

  /** The session's activated tools, in activation order. */
  active(session: string): readonly string[] {
    return this.#activation.active(session);
  }

  /** Sets the session's activations to `names` (restored from elsewhere); whether they changed. */
  restore(session: string, names: readonly string[]): boolean {
    return this.#activation.replace(session, names);
  }

  /** Forgets a session's activations. */
  forget(session: string): void {
    this.#activation.forget(session);
  }

  #search(candidates: readonly Candidate[], query: string, k: number): Candidate[] {
    // One index per distinct candidate set: rebuilt only when the tools a tenant may call change.
    const key = candidates.map((c) => c.tool.name).join("\u0000");
    let index = this.#indexes.get(key);
    if (!index) {
      index = new ToolSearchIndex(candidates.map((c) => c.tool));
      this.#indexes.set(key, index);
      if (this.#indexes.size > 8) this.#indexes.delete(this.#indexes.keys().next().value!);
    }
    const byName = new Map(candidates.map((c) => [c.tool.name, c]));
    return index.search(query, k).map((r) => byName.get(r.tool.name)!);
  }

  #policy(tenant: string) {
    const tenants = this.#governance.policies.tenants;
    return tenants.get(tenant) ?? tenants.get("*");
  }
}

function oneLine(text: string): string {
  const first = text.split(/\n|(?<=\.)\s/)[0]!.trim();
  return first.length > 160 ? first.slice(0, 157) + "…" : first;
}

function text(message: string): CallToolResult {
  return { content: [{ type: "text", text: message }] };
}
