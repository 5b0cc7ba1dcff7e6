import assert from "node:assert/strict";
import { LineWriter } from "./line_writer.ts";

/** Leak sanitizers on (Deno 2.9 has them off by default): every timer cleared, every transport closed. */
const SANITIZED = { sanitizeOps: true, sanitizeResources: true };

const decoder = new TextDecoder();

/**
 * A byte sink that records each chunk it is given. With `hold`, each write stays pending until
 * the test settles it through `writes`.
 */
async function sink(options: { hold?: boolean } = {}) {
  const chunks: string[] = [];
  const writes: PromiseWithResolvers<void>[] = [];
  const stream = new WritableStream<Uint8Array>({
    write(chunk) {
      chunks.push(decoder.decode(chunk));
      if (!options.hold) return;
      const write = Promise.withResolvers<void>();
      writes.push(write);
      return write.promise;
    },
  });
  const writer = stream.getWriter();
  await writer.ready; // the stream has started: a write reaches the sink synchronously
  return { chunks, writes, writer, lines: new LineWriter(writer) };
}

Deno.test("Lines come out in order, each followed by a newline", SANITIZED, async () => {
  const { chunks, writer, lines } = await sink();
  await lines.write("one");
  await lines.write('{"jsonrpc":"2.0"}');
  await Promise.all([lines.write("a"), lines.write("b"), lines.write("c")]);
  assert.equal(chunks.join(""), 'one\n{"jsonrpc":"2.0"}\na\nb\nc\n');
  await writer.close();
});

Deno.test("The first line is written at once, as its own write", SANITIZED, async () => {
  const { chunks, writes, writer, lines } = await sink({ hold: true });
  const first = lines.write("first");
  assert.deepEqual(chunks, ["first\n"], "handed to the stream without waiting for more lines");
  writes[0]!.resolve();
  await first;
  assert.deepEqual(chunks, ["first\n"]);
  await writer.close();
});

Deno.test(
  "Lines written while a write is pending are coalesced into the next single write",
  SANITIZED,
  async () => {
    const { chunks, writes, writer, lines } = await sink({ hold: true });
    const first = lines.write("1");
    const queued = [lines.write("2"), lines.write("3"), lines.write("4")];
    assert.deepEqual(chunks, ["1\n"], "the queued lines wait for the pending write");
    writes[0]!.resolve();
    await waitFor(() => writes.length === 2);
    assert.deepEqual(chunks, ["1\n", "2\n3\n4\n"], "one write carries every queued line");
    const later = lines.write("5"); // queued behind the second write
    writes[1]!.resolve();
    await waitFor(() => writes.length === 3);
    writes[2]!.resolve();
    await Promise.all([first, ...queued, later]);
    assert.deepEqual(chunks, ["1\n", "2\n3\n4\n", "5\n"]);
    await writer.close();
  },
);

Deno.test("After the queue drains, the next line is again written at once", SANITIZED, async () => {
  const { chunks, writes, writer, lines } = await sink({ hold: true });
  const first = lines.write("a");
  writes[0]!.resolve();
  await first;
  const second = lines.write("b");
  assert.deepEqual(chunks, ["a\n", "b\n"]);
  writes[1]!.resolve();
  await second;
  await writer.close();
});

Deno.test(
  "A failing sink rejects the pending write and every line queued behind it",
  SANITIZED,
  async () => {
    const { chunks, writes, lines } = await sink({ hold: true });
    const failure = new Error("broken pipe");
    const pending = lines.write("1");
    const queued = [lines.write("2"), lines.write("3")];
    writes[0]!.reject(failure);
    for (const write of [pending, ...queued]) {
      await assert.rejects(write, (error: unknown) => error === failure);
    }
    assert.deepEqual(chunks, ["1\n"], "the queued lines are dropped, not written");
  },
);

Deno.test(
  "After the sink failed, later writes reject with the stream's error and write nothing",
  SANITIZED,
  async () => {
    const { chunks, writes, lines } = await sink({ hold: true });
    const failure = new Error("broken pipe");
    const pending = lines.write("1");
    writes[0]!.reject(failure);
    await assert.rejects(pending);
    await assert.rejects(lines.write("2"), (error: unknown) => error === failure);
    await assert.rejects(lines.write("3"), (error: unknown) => error === failure);
    assert.deepEqual(chunks, ["1\n"]);
  },
);

/** Lets queued promise reactions run until `check` holds (no timers). */
async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !check(); i++) await Promise.resolve();
  assert.ok(check(), "the condition held after the pending reactions ran");
}

Deno.test(
  "Lines dropped with a failed write are never written later; a writer that recovers takes new lines",
  SANITIZED,
  async () => {
    // The LineWriter only calls `write`; this writer fails its first write and then works again.
    const chunks: string[] = [];
    const first = Promise.withResolvers<void>();
    let calls = 0;
    const writer = {
      write(chunk: Uint8Array): Promise<void> {
        chunks.push(decoder.decode(chunk));
        return ++calls === 1 ? first.promise : Promise.resolve();
      },
    } as unknown as WritableStreamDefaultWriter<Uint8Array>;
    const lines = new LineWriter(writer);
    const failing = lines.write("lost-1");
    const queued = lines.write("lost-2");
    first.reject(new Error("EAGAIN"));
    await assert.rejects(failing, /EAGAIN/);
    await assert.rejects(queued, /EAGAIN/);
    await lines.write("next");
    assert.deepEqual(chunks, ["lost-1\n", "next\n"]);
  },
);
