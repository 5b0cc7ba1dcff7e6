/**
 * A session's prompts: `prompts/list` (the engine's skill and agent prompts and the upstreams'
 * the caller may reach) and `prompts/get` (forwarded to the upstream serving the name, or the
 * engine's template filled with the arguments).
 * @module
 */
import {
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { GatewayError, toMcpError } from "../support/errors.ts";
import { paginate } from "../support/pagination.ts";
import { FORWARDED, forwardTraced } from "../tracing/upstream_span.ts";
import type { EngineCatalog } from "./engine_catalog.ts";
import { cursor, guard } from "./request_handler.ts";
import type { SessionContext } from "./session_context.ts";
import { upstreamCallContext } from "./upstream_context.ts";

/** What a session's prompt handlers need beyond the session. */
export interface PromptHandlersContext extends SessionContext {
  engine: EngineCatalog;
}

/** Installs prompts/list and prompts/get on the session. */
export function registerPromptHandlers(ctx: PromptHandlersContext): void {
  const { view, native, mayList } = ctx;
  ctx.handle(ListPromptsRequestSchema, async (request) => {
    await ctx.settled();
    return guard(() => {
      const prompts = [
        ...(native ? ctx.engine.prompts().map((p) => p.prompt) : []).filter((p) =>
          mayList("prompt", p.name, undefined)
        ),
        ...(view?.prompts() ?? []).filter((p) =>
          mayList("prompt", p.name, view?.resolvePrompt(p.name))
        ),
      ];
      const page = paginate(prompts, request.params?.cursor, ctx.pageSize);
      return { prompts: page.items, ...cursor(page.nextCursor) };
    });
  });

  ctx.handle(GetPromptRequestSchema, async (request, extra, span) => {
    const { name, arguments: args = {} } = request.params;
    const found = native ? ctx.engine.prompts().find((p) => p.prompt.name === name) : undefined;
    if (!found) {
      const route = view?.resolvePrompt(name);
      if (route) {
        await ctx.requireAccess("prompts/get", "prompt", name, route, args);
        try {
          return await forwardTraced(
            span,
            route,
            FORWARDED.promptsGet,
            upstreamCallContext(ctx.inbound, extra, undefined, route.handle.id),
            (traced) => route.handle.getPrompt(route.original, args, traced),
          );
        } catch (error) {
          throw toMcpError(error);
        }
      }
    }
    if (found) await ctx.requireAccess("prompts/get", "prompt", name, undefined, args);
    return guard(() => {
      if (!found) {
        throw new GatewayError(
          "not_found",
          `Unknown prompt "${name}"; call prompts/list for the names`,
          { prompt: name },
        );
      }
      for (const arg of found.prompt.arguments ?? []) {
        if (arg.required && args[arg.name] === undefined) {
          throw new GatewayError(
            "invalid_arguments",
            `Prompt "${name}" needs the argument "${arg.name}"`,
            { prompt: name, argument: arg.name },
          );
        }
      }
      return {
        description: found.prompt.description,
        messages: [{
          role: "user" as const,
          content: { type: "text" as const, text: fillTemplate(found.template, args) },
        }],
      };
    });
  });
}

/** Fills `{{name}}` placeholders; unknown placeholders are left as they are. */
function fillTemplate(template: string, args: Record<string, string>): string {
  return template.replace(
    /\{\{\s*([A-Za-z0-9_-]+)\s*\}\}/g,
    (whole, key: string) => Object.hasOwn(args, key) ? args[key]! : whole,
  );
}
