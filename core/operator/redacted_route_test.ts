import assert from "node:assert/strict";
import type { HttpRoute } from "../http/http_route.ts";
import { principalOf, type TokenPayload } from "../auth/token_payload.ts";
import { redactedRoute } from "./redacted_route.ts";

const caller: TokenPayload = {
  tenant: "t",
  scopes: ["admin"],
  subject: "s",
  principal: principalOf("tokens_file", "s"),
};
const answering = (response: () => Response): HttpRoute => ({
  path: "/x",
  methods: ["GET"],
  handle: () => Promise.resolve(response()),
});
const get = (route: HttpRoute) => route.handle(new Request("http://h/x"), caller);

Deno.test("A JSON body is redacted field by field; status and headers stay", async () => {
  const route = redactedRoute(
    answering(() =>
      Response.json({ lastError: "connect http://u:pw@h:1/ failed", n: 3 }, {
        status: 409,
        headers: { "x-kept": "1" },
      })
    ),
  );
  const response = await get(route);
  assert.equal(response.status, 409);
  assert.equal(response.headers.get("x-kept"), "1");
  assert.deepEqual(await response.json(), {
    lastError: "connect http://[redacted]@h:1/ failed",
    n: 3,
  });
});

Deno.test("A plain-text body (the metrics exposition) is redacted as text", async () => {
  const route = redactedRoute(
    answering(() =>
      new Response('m{reason="token=abc123"} 1\n', { headers: { "content-type": "text/plain" } })
    ),
  );
  assert.equal(await (await get(route)).text(), 'm{reason="token=[redacted]"} 1\n');
});

Deno.test("An event stream passes through unread (its events were redacted on the bus)", async () => {
  const stream = new ReadableStream<Uint8Array>();
  const route = redactedRoute(
    answering(() => new Response(stream, { headers: { "content-type": "text/event-stream" } })),
  );
  const response = await get(route);
  assert.equal(response.body, stream);
  await response.body!.cancel();
});
