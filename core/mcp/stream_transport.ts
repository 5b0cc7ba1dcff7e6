/**
 * StreamTransport: an SDK `Transport` over a pair of byte streams carrying newline-delimited
 * JSON-RPC (MCP's stdio framing), with a frame-size limit and JSON-RPC errors for bad frames.
 *
 * The SDK's own stdio transports drop malformed lines silently; a gateway must answer them
 * (-32700 for bytes that are not JSON, -32600 for JSON that is not a JSON-RPC message) and keep
 * the connection up.
 * @module
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { isJsonRpcMessage } from "../support/jsonrpc_shape.ts";
import { ChunkReader } from "../support/chunk_reader.ts";
import { concatBytes } from "../support/concat_bytes.ts";
import { LineWriter } from "../support/line_writer.ts";
import { serializeMessage } from "../support/wire_json.ts";

/** Options for {@link StreamTransport}. */
export interface StreamTransportOptions {
  /** Largest accepted frame in bytes; longer lines are discarded and answered with -32600. */
  maxMessageBytes: number;
  /** Whether to answer malformed frames with JSON-RPC errors (a server does; a client only reports). */
  answerMalformed?: boolean;
}

const NEWLINE = 0x0a;
const decoder = new TextDecoder("utf-8", { fatal: true });

/** A `Transport` over readable and writable byte streams, one JSON-RPC message per line. */
export class StreamTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  #input: ReadableStream<Uint8Array>;
  #output: WritableStream<Uint8Array>;
  #writer: WritableStreamDefaultWriter<Uint8Array> | undefined;
  #lines: LineWriter | undefined;
  #reader: ChunkReader | undefined;
  #options: Required<StreamTransportOptions>;
  #closed = false;
  #pump: Promise<void> | undefined;

  constructor(
    input: ReadableStream<Uint8Array>,
    output: WritableStream<Uint8Array>,
    options: StreamTransportOptions,
  ) {
    this.#input = input;
    this.#output = output;
    this.#options = { answerMalformed: true, ...options };
  }

  start(): Promise<void> {
    if (this.#reader) throw new Error("StreamTransport already started");
    this.#reader = new ChunkReader(this.#input);
    this.#writer = this.#output.getWriter();
    this.#lines = new LineWriter(this.#writer);
    this.#pump = this.#read();
    return Promise.resolve();
  }

  /** Resolves when the input has ended and the transport closed. */
  get finished(): Promise<void> {
    return this.#pump ?? Promise.resolve();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed || !this.#lines) throw new Error("Transport is closed");
    await this.#lines.write(serializeMessage(message));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await this.#reader?.cancel();
    } catch { /* input already gone */ }
    try {
      await this.#writer?.close();
    } catch { /* output already gone */ }
    this.onclose?.();
  }

  async #read(): Promise<void> {
    const reader = this.#reader!;
    const max = this.#options.maxMessageBytes;
    let chunks: Uint8Array[] = [];
    let size = 0;
    let discarding = false;
    try {
      for (;;) {
        const value = await reader.read();
        if (value === undefined) break;
        let start = 0;
        for (let i = value.indexOf(NEWLINE); i !== -1; i = value.indexOf(NEWLINE, start)) {
          // Frames read together are delivered a microtask apart: the SDK's Protocol runs a
          // notification's handler a microtask later but a response's at once, so a client got a
          // call's last progress and its result in one chunk, and dropped the progress.
          if (start > 0) await undefined;
          const piece = value.subarray(start, i);
          start = i + 1;
          if (discarding || size + piece.length > max) {
            discarding = false;
            chunks = [];
            size = 0;
            this.#reject(
              -32600,
              `Invalid Request: message exceeds ${max} bytes (MCP_MAX_MESSAGE_BYTES)`,
            );
            continue;
          }
          chunks.push(piece);
          this.#frame(concatBytes(chunks, size + piece.length));
          chunks = [];
          size = 0;
        }
        const rest = value.subarray(start);
        if (discarding) continue;
        if (size + rest.length > max) {
          // Drop what we hold and everything up to the next newline, then answer once.
          discarding = true;
          chunks = [];
          size = 0;
          continue;
        }
        if (rest.length > 0) {
          chunks.push(rest.slice());
          size += rest.length;
        }
      }
    } catch (error) {
      if (!this.#closed) this.onerror?.(error as Error);
    } finally {
      await this.close();
    }
  }

  #frame(bytes: Uint8Array): void {
    let text: string;
    try {
      text = decoder.decode(bytes).trim();
    } catch {
      this.#reject(-32700, "Parse error: message is not valid UTF-8");
      return;
    }
    if (text === "") return;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      this.#reject(-32700, `Parse error: ${(error as Error).message}`);
      return;
    }
    if (Array.isArray(json)) {
      this.#reject(
        -32600,
        "Invalid Request: JSON-RPC batches are not supported; send one message per line",
      );
      return;
    }
    if (!isJsonRpcMessage(json)) {
      const id = (json as { id?: unknown } | null)?.id;
      const validId = typeof id === "string" || typeof id === "number" ? id : null;
      this.#reject(
        -32600,
        'Invalid Request: expected a JSON-RPC 2.0 message with "jsonrpc": "2.0" and a string "method" (or a result/error for an id)',
        validId,
      );
      return;
    }
    try {
      this.onmessage?.(json);
    } catch (error) {
      this.onerror?.(error as Error);
    }
  }

  #reject(code: number, message: string, id: string | number | null = null): void {
    this.onerror?.(new Error(message));
    if (!this.#options.answerMalformed || this.#closed || !this.#writer) return;
    // The SDK's message type requires a non-null id; a JSON-RPC error for an unreadable frame has
    // id null by the JSON-RPC spec, so this frame is written directly.
    this.#lines!.write(JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } })).catch(
      () => {},
    );
  }
}
