/**
 * A session's `completion/complete`: forwarded to the upstream serving the prompt or resource
 * template, or answered from the engine (the ids of a definition kind's `{id}`). Completing
 * needs the same access as using the item, since it reveals what the item holds.
 * @module
 */
import { CompleteRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { toMcpError } from "../support/errors.ts";
import { FORWARDED, forwardTraced } from "../tracing/upstream_span.ts";
import type { EngineCatalog } from "./engine_catalog.ts";
import { guard } from "./request_handler.ts";
import type { SessionContext } from "./session_context.ts";
import { upstreamCallContext } from "./upstream_context.ts";

/** What a session's completion handler needs beyond the session. */
export interface CompletionHandlersContext extends SessionContext {
  engine: EngineCatalog;
}

/** At most this many values in one completion. */
const MAX_VALUES = 100;

/** Installs completion/complete on the session. */
export function registerCompletionHandlers(ctx: CompletionHandlersContext): void {
  const { view, native } = ctx;
  ctx.handle(CompleteRequestSchema, async (request, extra, span) => {
    const { ref, argument } = request.params;
    const route = ref.type === "ref/prompt"
      ? (native && ctx.engine.prompts().some((p) => p.prompt.name === ref.name)
        ? undefined
        : view?.resolvePrompt(ref.name))
      : view?.resolveResource(ref.uri);
    // Completion reveals what a prompt or resource holds: the same access as using it.
    const completing = { argument: argument.name };
    if (ref.type === "ref/prompt") {
      await ctx.requireAccess("completion/complete", "prompt", ref.name, route, completing);
    } else {
      await ctx.requireAccess(
        "completion/complete",
        "resource-template",
        ref.uri,
        route,
        completing,
      );
    }
    if (route) {
      const upstreamRef = ref.type === "ref/prompt"
        ? { type: "ref/prompt" as const, name: route.original }
        : { type: "ref/resource" as const, uri: route.original };
      try {
        return await forwardTraced(
          span,
          route,
          FORWARDED.completionComplete,
          upstreamCallContext(ctx.inbound, extra, undefined, route.handle.id),
          (traced) => route.handle.complete({ ...request.params, ref: upstreamRef }, traced),
        );
      } catch (error) {
        throw toMcpError(error);
      }
    }
    return guard(() => {
      const candidates = ref.type === "ref/resource"
        ? ctx.engine.completionCandidates(ref.uri, argument.name)
        : [];
      const values = candidates.filter((c) => c.startsWith(argument.value));
      return {
        completion: {
          values: values.slice(0, MAX_VALUES),
          total: values.length,
          hasMore: values.length > MAX_VALUES,
        },
      };
    });
  });
}
