/**
 * The event bus interface and its in-process implementation (the embedded default).
 * @module
 */
import type { GatewayEvent } from "./events.ts";
import type { Logger } from "../support/logger.ts";

/** A subscriber; it may not throw into the publisher (errors are logged and dropped). */
export type EventHandler = (event: GatewayEvent) => void;

/** Publishes gateway events. Publishing never blocks and never fails a call. */
export interface EventBus {
  /** Publishes an event to every subscriber (and, for a remote bus, to the wire). */
  publish(event: GatewayEvent): void;
  /** Subscribes to all events; returns the unsubscribe function. */
  subscribe(handler: EventHandler): () => void;
  /** Flushes and releases resources. */
  close(): Promise<void>;
}

/** The in-process bus: synchronous fan-out to local subscribers. */
export class InProcessEventBus implements EventBus {
  #handlers = new Set<EventHandler>();
  #logger: Logger | undefined;

  constructor(logger?: Logger) {
    this.#logger = logger;
  }

  publish(event: GatewayEvent): void {
    for (const handler of [...this.#handlers]) {
      try {
        handler(event);
      } catch (error) {
        this.#logger?.warn("event subscriber threw; event delivered to the others", {
          event: event.type,
          error: String(error),
        });
      }
    }
  }

  subscribe(handler: EventHandler): () => void {
    this.#handlers.add(handler);
    return () => void this.#handlers.delete(handler);
  }

  close(): Promise<void> {
    this.#handlers.clear();
    return Promise.resolve();
  }
}
