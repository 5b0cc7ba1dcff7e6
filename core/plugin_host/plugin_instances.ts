/**
 * The instances of loaded plugins, kept by kind with the type each kind's factory returns, so
 * the services that consume them (transports, the bus, upstream adapters, discovery, scanner
 * rules, models) get them typed instead of cast back from `unknown`.
 * @module
 */
import type { PluginKind, PluginManifest } from "../plugin_api/mod.ts";
import type { LoadedPlugin } from "./plugin_loader.ts";

/** What the `create` factory of a plugin of kind `K` resolves to. */
export type PluginInstance<K extends PluginKind> = Awaited<
  ReturnType<Extract<PluginManifest, { kind: K }>["create"]>
>;

/** One instance with the plugin that made it. */
export interface KeptInstance<K extends PluginKind> {
  plugin: LoadedPlugin;
  value: PluginInstance<K>;
}

/** An instance of any kind. */
export type AnyKeptInstance = { [K in PluginKind]: KeptInstance<K> }[PluginKind];

/** Instances of loaded plugins by kind, in load order. */
export class PluginInstances {
  #byKind: { [K in PluginKind]: KeptInstance<K>[] } = {
    transport: [],
    upstream: [],
    discovery: [],
    "scanner-rule": [],
    bus: [],
    model: [],
  };

  /** Keeps `value`, made by `plugin`, and returns it. */
  add<K extends PluginKind>(
    kind: K,
    plugin: LoadedPlugin,
    value: PluginInstance<K>,
  ): PluginInstance<K> {
    const list: KeptInstance<K>[] = this.#byKind[kind];
    list.push({ plugin, value });
    return value;
  }

  /** The instances of one kind. */
  of<K extends PluginKind>(kind: K): readonly PluginInstance<K>[] {
    const list: readonly KeptInstance<K>[] = this.#byKind[kind];
    return list.map((i) => i.value);
  }

  /** Every instance with its plugin, kind by kind. */
  all(): AnyKeptInstance[] {
    return Object.values(this.#byKind).flat();
  }
}
