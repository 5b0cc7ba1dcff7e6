/**
 * Event bus over NATS: gateway replicas share events on `agent33.mcp.*` subjects.
 *
 * Selected when NATS_URL is set; the kernel passes it as `ctx.config.url`. Without it the
 * gateway uses the in-process bus.
 * @module
 */
import { definePlugin } from "../../core/plugin_api/mod.ts";

export default definePlugin({
  name: "bus-nats",
  version: "1.0.0",
  kind: "bus",
  description: "Publishes gateway events to NATS and receives other replicas' events",
  permissions: { net: true },
  async create(ctx) {
    const url = ctx.config.url;
    if (typeof url !== "string" || url.trim() === "") throw new Error("bus-nats needs NATS_URL");
    // Loaded only when NATS is configured: the client costs ~12 MiB of a gateway's memory.
    const { NatsEventBus } = await import("./nats_event_bus.ts");
    return await NatsEventBus.connect({
      url: url.trim(),
      logger: ctx.logger,
      clock: ctx.clock,
      name: "agent33-gateway",
    });
  },
});
