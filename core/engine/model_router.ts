/**
 * ModelRouter: picks the model provider plugin an agent names (`provider` or `provider:model`).
 * @module
 */
import { GatewayError } from "../support/errors.ts";
import type { ModelProvider } from "../plugin_api/mod.ts";

/** Routes a model name to its provider. */
export class ModelRouter {
  readonly #providers: () => readonly ModelProvider[];
  readonly #fallback: string;

  /** `providers` is read per call, so plugins loaded after construction are seen. */
  constructor(providers: () => readonly ModelProvider[], fallback: string) {
    this.#providers = providers;
    this.#fallback = fallback;
  }

  /** The provider and model for `spec` (the engine default when undefined); throws naming the fix. */
  resolve(spec: string | undefined, where: string): { provider: ModelProvider; model?: string } {
    const full = spec ?? this.#fallback;
    const at = full.indexOf(":");
    const name = at < 0 ? full : full.slice(0, at);
    const model = at < 0 ? undefined : full.slice(at + 1);
    const provider = this.#providers().find((p) => p.name === name);
    if (!provider) {
      const known = this.#providers().map((p) => p.name);
      throw new GatewayError(
        "config_invalid",
        `No model provider "${name}" (model "${full}" in ${where}); loaded providers: ` +
          `${known.join(", ") || "none"}. Use one of them, or load its model-* plugin`,
        { model: full },
      );
    }
    return { provider, ...(model ? { model } : {}) };
  }
}
