/**
 * The JSON text of outbound messages, as every wire transport of the gateway writes it.
 *
 * A `tools/list` page is most of the bytes a gateway sends, and serializing 5,000 descriptors
 * took longer than everything else it did to answer the list. Descriptors are replaced, never
 * mutated, when a fleet or a policy changes, so each one's text is kept with it (weakly: it goes
 * when the descriptor goes) and a page marked with {@link toolPage} is joined from those texts,
 * not serialized again. Every other message is `JSON.stringify`'d as before.
 * @module
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

const descriptorTexts = new WeakMap<object, string>();
const toolPages = new WeakSet<object>();

/**
 * Marks `result` as a page of tool descriptors that are never mutated (shared, immutable
 * objects), so its text can be joined from each descriptor's kept text.
 */
export function toolPage<T extends { tools: readonly object[] }>(result: T): T {
  toolPages.add(result);
  return result;
}

/** The JSON text of `message`. */
export function serializeMessage(message: JSONRPCMessage): string {
  const { result } = message as { result?: unknown };
  if (typeof result === "object" && result !== null && toolPages.has(result) && isPlain(message)) {
    return `{"jsonrpc":"2.0","id":${JSON.stringify((message as { id: unknown }).id)},"result":${
      pageText(result as { tools: readonly object[] })
    }}`;
  }
  return JSON.stringify(message);
}

/** Only `jsonrpc`, `id` and `result`: anything else keeps the general path. */
function isPlain(message: object): boolean {
  let keys = 0;
  for (const key in message) {
    if (key !== "jsonrpc" && key !== "id" && key !== "result") return false;
    keys++;
  }
  return keys === 3;
}

function pageText(page: { tools: readonly object[] }): string {
  let text = '{"tools":[';
  const { tools } = page;
  for (let i = 0; i < tools.length; i++) {
    const tool = tools[i]!;
    let one = descriptorTexts.get(tool);
    if (one === undefined) {
      one = JSON.stringify(tool);
      descriptorTexts.set(tool, one);
    }
    text += i === 0 ? one : "," + one;
  }
  text += "]";
  for (const key in page) {
    if (key === "tools") continue;
    const value = (page as Record<string, unknown>)[key];
    if (value !== undefined) text += `,${JSON.stringify(key)}:${JSON.stringify(value)}`;
  }
  return text + "}";
}
