/**
 * A workaround for a leak in the SDK's Streamable HTTP server transport in JSON response mode.
 * @module
 */
import type { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";

/**
 * Works around modelcontextprotocol/typescript-sdk#2559 (1.32.2): in JSON response mode the
 * transport never removes a request's stream entry after answering, so a long session grows by
 * ~5 KB per call. Wrapping each entry's `resolveJson` releases the entry once the answer is out.
 */
export function releaseJsonStreams(transport: WebStandardStreamableHTTPServerTransport): void {
  type Entry = { resolveJson?: (response: Response) => void; cleanup?: () => void };
  const mapping = (transport as unknown as { _streamMapping?: Map<string, Entry> })._streamMapping;
  if (!(mapping instanceof Map)) return; // a fixed SDK may have renamed it: nothing to work around
  const set = mapping.set.bind(mapping);
  mapping.set = (id: string, entry: Entry) => {
    const resolve = entry.resolveJson;
    if (resolve) {
      entry.resolveJson = (response) => {
        resolve(response);
        entry.cleanup?.();
      };
    }
    return set(id, entry);
  };
}

/** Live stream entries of a session's transport (for the regression test of the workaround). */
export function openStreamCount(transport: WebStandardStreamableHTTPServerTransport): number {
  return (transport as unknown as { _streamMapping?: Map<string, unknown> })._streamMapping?.size ??
    0;
}
