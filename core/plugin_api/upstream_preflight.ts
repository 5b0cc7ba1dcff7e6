/**
 * The optional part of an upstream adapter that checks each start before its relay is made (the
 * stdio adapter's module graph check). Its own file so the facade's mod.ts stays within bounds;
 * plugins import it from here like the rest of the facade.
 * @module
 */
import type { UpstreamAdapter, UpstreamPlan, UpstreamServerSpec } from "./mod.ts";

/** An adapter that vets every start of a server: a rejection is that start's failure. */
export interface UpstreamPreflight {
  /** Runs before each start of the server's relay, with the plan it will start from. */
  preflight(server: UpstreamServerSpec, plan: UpstreamPlan): Promise<void>;
}

/** The adapter's preflight, if it has one. */
export function preflightOf(
  adapter: UpstreamAdapter,
): UpstreamPreflight["preflight"] | undefined {
  const preflight = (adapter as UpstreamAdapter & Partial<UpstreamPreflight>).preflight;
  return typeof preflight === "function" ? preflight.bind(adapter) : undefined;
}
