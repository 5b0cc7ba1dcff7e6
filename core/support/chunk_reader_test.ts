import assert from "node:assert/strict";
import { ChunkReader } from "./chunk_reader.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (chunk: Uint8Array | undefined) => new TextDecoder().decode(chunk);

/** A byte stream (as Deno's pipes and sockets are) that delivers `parts` one per pull. */
function byteStream(parts: string[]): ReadableStream<Uint8Array> {
  const queue = parts.map(bytes);
  return new ReadableStream({
    type: "bytes",
    pull(controller) {
      const next = queue.shift();
      if (!next) {
        controller.close();
        return controller.byobRequest?.respond(0); // a pending BYOB read ends with the stream
      }
      const view = controller.byobRequest!.view!;
      const into = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
      into.set(next);
      controller.byobRequest!.respond(next.length);
    },
  });
}

Deno.test("A byte stream is read chunk by chunk into one reused buffer", async () => {
  const reader = new ChunkReader(byteStream(["one\n", "two\n"]), 16);
  const first = await reader.read();
  assert.equal(text(first), "one\n");
  const buffer = first!.buffer;
  const second = await reader.read();
  assert.equal(text(second), "two\n");
  assert.equal(second!.byteLength, 4);
  assert.equal(
    first!.buffer.byteLength,
    0,
    "the first chunk's memory was handed to the second read",
  );
  assert.notEqual(second!.buffer, buffer); // same memory, transferred into a new ArrayBuffer object
  assert.equal(second!.buffer.byteLength, 16);
  assert.equal(await reader.read(), undefined);
  assert.equal(await reader.read(), undefined);
});

Deno.test("A stream that is not a byte stream is read with a default reader", async () => {
  const stream = ReadableStream.from([bytes("a"), bytes("b")]);
  const reader = new ChunkReader(stream);
  assert.equal(text(await reader.read()), "a");
  assert.equal(text(await reader.read()), "b");
  assert.equal(await reader.read(), undefined);
});

Deno.test("Cancelling ends a pending read as the end of the stream", async () => {
  const reader = new ChunkReader(new ReadableStream({ type: "bytes" }));
  const pending = reader.read();
  await reader.cancel("done");
  assert.equal(await pending, undefined);
});

Deno.test("A pipe from a real process is read whole through one buffer", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "for (let i = 0; i < 2000; i++) console.log('line ' + i)"],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = new ChunkReader(child.stdout, 1024);
  let all = "";
  for (let chunk = await reader.read(); chunk; chunk = await reader.read()) all += text(chunk);
  await child.status;
  const lines = all.trimEnd().split("\n");
  assert.equal(lines.length, 2000);
  assert.equal(lines[1999], "line 1999");
});
