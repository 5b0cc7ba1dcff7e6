import assert from "node:assert/strict";
import { connect } from "nats";
import { systemClock } from "../../core/support/clock.ts";
import { silentLogger } from "../../core/support/logger.ts";
import { NEEDS_NATS, startNatsServer } from "../../tests/support/nats_server.ts";
import { sharedStateContract } from "../../tests/support/shared_state_contract.ts";
import { NatsSharedState, serializesCompareAndSet } from "./nats_shared_state.ts";

// Two connections to one real nats-server with JetStream: two replicas' views of the same state.
sharedStateContract("JetStream", async () => {
  const server = await startNatsServer();
  const [ca, cb] = await Promise.all([
    connect({ servers: server.url }),
    connect({ servers: server.url }),
  ]);
  const a = new NatsSharedState(ca, { logger: silentLogger, clock: systemClock });
  const b = new NatsSharedState(cb, { logger: silentLogger, clock: systemClock });
  return {
    a,
    b,
    async stop() {
      await a.close();
      await b.close();
      await Promise.all([ca.close(), cb.close()]);
      await server.stop();
    },
  };
}, { ignore: NEEDS_NATS.ignore });

Deno.test("compare-and-set on replicated buckets is trusted from nats-server 2.9.21 on (nats-io/nats-server#4320)", () => {
  assert.deepEqual(
    ["2.9.10", "2.9.20", "2.9.21", "2.10.0", "2.11.4-beta", "3.0.0"].map(serializesCompareAndSet),
    [false, false, true, true, true, true],
  );
});
