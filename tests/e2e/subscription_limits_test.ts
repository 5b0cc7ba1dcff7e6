/**
 * A session's resource subscriptions are bounded: each is kept (and held upstream) for the
 * session's life, so an unbounded client held the gateway's memory with distinct URIs (400
 * subscriptions of 100 KB URIs grew the process by 170 MB). A real gateway over the reference
 * server-everything, whose dynamic resources accept any id, and the SDK's client.
 */
import assert from "node:assert/strict";
import { everythingServer } from "../support/fleet.ts";
import { connectHttp, withFleet } from "../support/gateway.ts";

const MAX_SUBSCRIPTIONS = 256;
const uri = (id: number | string) => `proxy://everything/demo://resource/dynamic/text/${id}`;

Deno.test("A session holds at most 256 resource subscriptions and URIs of at most 4,096 characters; one more is refused naming the bound, and unsubscribing makes room", async () => {
  await withFleet(`proxy_servers:${everythingServer()}`, async (gateway, client) => {
    const other = await connectHttp(gateway);
    try {
      for (let i = 0; i < MAX_SUBSCRIPTIONS; i++) await client.subscribeResource({ uri: uri(i) });
      // The same URI again is no new subscription.
      await client.subscribeResource({ uri: uri(0) });
      await assert.rejects(
        client.subscribeResource({ uri: uri("one-more") }),
        (error: Error & { data?: { code?: string; max?: number } }) =>
          error.data?.code === "subscription_limit" && error.data.max === MAX_SUBSCRIPTIONS &&
          /holds 256 subscriptions, the most one may; unsubscribe from one/.test(error.message),
      );
      await client.unsubscribeResource({ uri: uri(0) });
      await client.subscribeResource({ uri: uri("one-more") });
      // The bound is the session's: another session subscribes as it likes.
      await other.subscribeResource({ uri: uri("elsewhere") });
      await assert.rejects(
        other.subscribeResource({ uri: `${uri(1)}?${"x".repeat(5000)}` }),
        /a session keeps subscriptions to URIs of at most 4096/,
      );
    } finally {
      await other.close();
    }
  });
});
