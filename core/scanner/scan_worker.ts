/**
 * The scanner's worker: loads the scanner-rule plugins of the given folders once, then scans
 * descriptor sets posted to it, so a large or hostile catalog never blocks the gateway's event
 * loop. Messages: `{ type: "init", dirs }` → `{ type: "ready", problems }`;
 * `{ type: "scan", id, descriptors }` → `{ type: "result", id, result }` or `{ type: "error", … }`.
 * @module
 */
/// <reference lib="deno.worker" />
import type { ScannerRule } from "../plugin_api/mod.ts";
import type { ServerDescriptor } from "./descriptor.ts";
import { loadScannerRulesFrom } from "./rules.ts";
import { scanServers } from "./scan.ts";

/** A message to the worker. */
export type ScanWorkerRequest =
  | { type: "init"; dirs: string[] }
  | { type: "scan"; id: number; descriptors: ServerDescriptor[] };

let rules: Promise<ScannerRule[]> | undefined;

self.onmessage = async (event: MessageEvent<ScanWorkerRequest>) => {
  const message = event.data;
  if (message.type === "init") {
    const loaded = loadScannerRulesFrom(message.dirs);
    rules = loaded.then((r) => r.rules);
    const { problems } = await loaded.catch((e) => ({ problems: [String(e)] }));
    self.postMessage({ type: "ready", problems });
    return;
  }
  try {
    const result = scanServers(message.descriptors, await (rules ?? Promise.resolve([])));
    self.postMessage({ type: "result", id: message.id, result });
  } catch (error) {
    self.postMessage({ type: "error", id: message.id, error: String(error) });
  }
};
