/**
 * SwitchableEventBus: the kernel's bus handle. Services get it at construction; the backend behind
 * it (in-process by default, a bus plugin such as NATS when configured) is chosen at start.
 *
 * Every event is redacted (core/support/redact.ts) here, the one way onto the bus, before any local
 * subscriber, the dashboard's stream or NATS sees it.
 * @module
 */
import type { EventBus, EventHandler } from "./event_bus.ts";
import type { GatewayEvent, GatewayEventType } from "./events.ts";
import { redactDeep } from "../support/redact.ts";

// Published once per call and made of identifiers, hashes and codes only: no free text to redact,
// and the call path stays free of redaction work.
const IDENTIFIERS_ONLY = new Set<GatewayEventType>(["governance.decision"]);

/** An EventBus whose backend can be replaced once services already hold it. */
export class SwitchableEventBus implements EventBus {
  #target: EventBus;
  #subscriptions = new Map<EventHandler, () => void>();
  #local = new Set<EventHandler>();

  constructor(initial: EventBus) {
    this.#target = initial;
  }

  publish(event: GatewayEvent): void {
    if (!IDENTIFIERS_ONLY.has(event.type)) event = redactDeep(event);
    for (const handler of [...this.#local]) {
      try {
        handler(event);
      } catch {
        // A local observer's failure is its own; the event still goes out.
      }
    }
    this.#target.publish(event);
  }

  /**
   * Subscribes to this process's own events only (never other replicas' events from NATS): for
   * per-process figures such as metrics.
   */
  subscribeLocal(handler: EventHandler): () => void {
    this.#local.add(handler);
    return () => void this.#local.delete(handler);
  }

  subscribe(handler: EventHandler): () => void {
    this.#subscriptions.set(handler, this.#target.subscribe(handler));
    return () => {
      this.#subscriptions.get(handler)?.();
      this.#subscriptions.delete(handler);
    };
  }

  /** Moves every subscriber to `next` and closes the previous backend. */
  async use(next: EventBus): Promise<void> {
    const previous = this.#target;
    this.#target = next;
    for (const [handler, unsubscribe] of this.#subscriptions) {
      unsubscribe();
      this.#subscriptions.set(handler, next.subscribe(handler));
    }
    await previous.close();
  }

  close(): Promise<void> {
    this.#subscriptions.clear();
    this.#local.clear();
    return this.#target.close();
  }
}
