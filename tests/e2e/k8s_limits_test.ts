/**
 * A hostile or broken Kubernetes API server cannot make discovery buffer without bound: a real
 * HTTP server on 127.0.0.1 answers the list with more than 16 MiB or more than 10,000 Services, or
 * a watch with an endless line, and the source fails with a clear error naming the bound instead.
 */
import assert from "node:assert/strict";
import {
  K8sLimitError,
  K8sSource,
  MAX_LIST_BYTES,
  MAX_LIST_ITEMS,
  MAX_WATCH_LINE_CHARS,
} from "../../plugins/discovery-k8s/k8s_source.ts";

/** A stream of `chunk` repeated until `total` bytes (or forever), ending with `tail`. */
function flood(chunk: string, total = Infinity, head = "", tail = ""): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(chunk);
  let sent = 0;
  let started = false;
  return new ReadableStream({
    pull(controller) {
      if (!started) {
        started = true;
        if (head) return controller.enqueue(new TextEncoder().encode(head));
      }
      if (sent >= total) {
        if (tail) controller.enqueue(new TextEncoder().encode(tail));
        return controller.close();
      }
      sent += bytes.length;
      controller.enqueue(bytes);
    },
  });
}

async function withApi(
  handler: (url: URL) => Response,
  fn: (api: string, watched: () => number) => Promise<void>,
): Promise<void> {
  let watches = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    const url = new URL(request.url);
    if (url.searchParams.has("watch")) watches++;
    return handler(url);
  });
  try {
    await fn(`http://127.0.0.1:${server.addr.port}`, () => watches);
  } finally {
    await server.shutdown();
  }
}

Deno.test("k8s refuses a list response over 16 MiB, reading no further", async () => {
  const padding = `{"metadata":{"name":"${"p".repeat(1000)}"}},`;
  await withApi(
    () =>
      new Response(flood(padding, MAX_LIST_BYTES + 1024 * 1024, '{"items":[', "{}]}"), {
        headers: { "content-type": "application/json" },
      }),
    async (api) => {
      const source = new K8sSource({ api });
      await assert.rejects(source.list(), (e: Error) => {
        assert.ok(e instanceof K8sLimitError);
        assert.match(e.message, /sent a response of more than 16777216 bytes/);
        assert.match(e.message, /MCP_K8S_NAMESPACE/);
        return true;
      });
    },
  );
});

Deno.test("k8s refuses a list of more than 10,000 Services", async () => {
  const items = Array.from({ length: MAX_LIST_ITEMS + 1 }, () => ({}));
  await withApi(
    () => Response.json({ metadata: { resourceVersion: "1" }, items }),
    async (api) => {
      await assert.rejects(
        new K8sSource({ api }).list(),
        /10001 Services in one list, more than 10000/,
      );
    },
  );
});

Deno.test("k8s stops a watch whose event line never ends at 1 MiB, and does not reconnect", async () => {
  await withApi(
    (url) =>
      url.searchParams.has("watch")
        ? new Response(flood('{"type":"ADDED","object":{"metadata":{"name":"' + "x".repeat(65536)))
        : Response.json({ metadata: { resourceVersion: "7" }, items: [] }),
    async (api, watched) => {
      const source = new K8sSource({ api, backoffMs: 10 });
      assert.deepEqual(await source.list(), []);
      const stop = new AbortController();
      try {
        await assert.rejects(
          async () => {
            for await (const _ of source.discover(stop.signal)) { /* nothing is announced */ }
          },
          (e: Error) => {
            assert.ok(e instanceof K8sLimitError);
            assert.match(e.message, new RegExp(`line of more than ${MAX_WATCH_LINE_CHARS}`));
            return true;
          },
        );
        assert.equal(watched(), 1, "a bound is a source error, not a dropped watch to resume");
      } finally {
        stop.abort();
      }
    },
  );
});
