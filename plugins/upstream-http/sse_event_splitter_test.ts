import assert from "node:assert/strict";
import { sseEventSplitter } from "./sse_event_splitter.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Runs `text`, cut into chunks at `cuts`, through a splitter; returns what came out and what it offered. */
async function split(text: string, cuts: number[], limit = 1024, replace?: (e: string) => string) {
  const bytes = encoder.encode(text);
  const bounds = [0, ...cuts, bytes.length];
  const offered: string[] = [];
  const out = await new Response(
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i + 1 < bounds.length; i++) {
          controller.enqueue(bytes.subarray(bounds[i], bounds[i + 1]));
        }
        controller.close();
      },
    }).pipeThrough(sseEventSplitter((event) => {
      const text = decoder.decode(event);
      offered.push(text);
      return replace ? encoder.encode(replace(text)) : undefined;
    }, limit)),
  ).text();
  return { out, offered };
}

const STREAMS = {
  lf: "data: one\n\nid: 2\ndata: two\n\n",
  crlf: "data: one\r\n\r\nid: 2\r\ndata: two\r\n\r\n",
  cr: "data: one\r\rid: 2\rdata: two\r\r",
};

Deno.test("Every event is offered once, whole, wherever the chunks are cut and whatever the line ends", async () => {
  for (const [ending, text] of Object.entries(STREAMS)) {
    for (let cut = 0; cut <= text.length; cut++) {
      const { out, offered } = await split(text, [cut]);
      assert.equal(out, text, `${ending}, cut at ${cut}: passed through unchanged`);
      // A CRLF cut between its CR and LF leaves the LF leading the next event (an empty line).
      assert.deepEqual(
        offered.map((e) => e.replace(/^\n/, "").replace(/[\r\n]+/g, "|")),
        ["data: one|", "id: 2|data: two|"],
        `${ending}, cut at ${cut}`,
      );
    }
  }
});

Deno.test("A replaced event's bytes take its place in the stream", async () => {
  const { out } = await split(STREAMS.lf, [3, 14], 1024, (e) => e.replace("two", "TWO"));
  assert.equal(out, "data: one\n\nid: 2\ndata: TWO\n\n");
});

Deno.test("An event over the limit passes through as it arrives and is never offered", async () => {
  const big = `data: ${"x".repeat(5000)}\n\n`;
  const { out, offered } = await split(`${big}data: after\n\n`, [100, 2000, 4000], 1024);
  assert.equal(out, `${big}data: after\n\n`);
  assert.deepEqual(offered, ["data: after\n\n"], "the next event is offered again");
});

Deno.test("A last event without its empty line is passed on as it came", async () => {
  const { out, offered } = await split("data: one\n\ndata: cut-off", [5]);
  assert.equal(out, "data: one\n\ndata: cut-off");
  assert.deepEqual(offered, ["data: one\n\n"]);
});
