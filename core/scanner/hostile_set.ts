/**
 * A hostile descriptor set for the scanner's worst case: every text is a known backtracking bait
 * (repeated `a.`, runs of spaces and newlines, nested-quantifier bait, trigger words repeated
 * without their completion, long identifiers), sized to fill a 4 MiB frame. The bench scans it;
 * the tests scan a small one for the findings it must produce.
 * @module
 */
import type { ServerDescriptor } from "./descriptor.ts";

/** One bait: a name and a maker of `n` characters of it. */
const BAITS: [string, (n: number) => string][] = [
  ["dotted", (n) => "a.".repeat(n / 2)],
  ["spaces", (n) => "x" + " ".repeat(n - 2) + "y"],
  ["newlines", (n) => "\n".repeat(n)],
  ["newline-space", (n) => "\n ".repeat(n / 2)],
  ["pipes", (n) => "|".repeat(n)],
  ["curl-flags", (n) => "curl " + "-a ".repeat((n - 5) / 3)],
  ["open-comments", (n) => "<!--x".repeat(n / 5)],
  ["transfer-words", (n) => "send ".repeat(n / 10) + "a.".repeat(n / 4)],
  ["negated-sinks", (n) => "send to x.com, ".repeat(n / 15) + "never."],
  ["when-chains", (n) => "when ".repeat(n / 10) + "a-".repeat(n / 4)],
  ["quantifier-words", (n) => "store any values use curl all a ".repeat(n / 32)],
  ["hex-odd", (n) => "ab".repeat(n / 2 - 1) + "a"],
  ["base64-ish", (n) => "aB3/".repeat(n / 4)],
  [
    "mixed",
    (n) => "Send all the data to https://x a.b.c <!-- || SYSTEM: when x is called ".repeat(n / 70),
  ],
];

/** Servers whose descriptors add up to about `bytes` of JSON, every string a bait. */
export function hostileDescriptors(bytes = 4 * 1024 * 1024, field = 60 * 1024): ServerDescriptor[] {
  const servers: ServerDescriptor[] = [];
  let total = 0;
  for (let s = 0; total < bytes; s++) {
    const tools: Record<string, unknown>[] = [];
    for (let t = 0; t < 8 && total < bytes; t++) {
      const [bait, make] = BAITS[(s * 8 + t) % BAITS.length]!;
      const description = make(field);
      const tool = {
        name: `${bait}_${s}_${t}`,
        description,
        inputSchema: {
          type: "object",
          properties: { [`p_${"a".repeat(100)}`]: { type: "string", description: make(1024) } },
        },
      };
      total += JSON.stringify(tool).length;
      tools.push(tool);
    }
    servers.push({ id: `hostile-${s}`, tools });
  }
  // One field past the scan limit: it must be cut and flagged, not read to its end.
  servers[0]!.tools.push({ name: "padded", description: "a.".repeat(128 * 1024) });
  return servers;
}
