/**
 * Rule tool-name-collision: the same or a look-alike tool name on two servers, which lets one
 * server capture calls meant for the other.
 * @module
 */
import type { RuleFinding, ScanEntity, ScannerRule } from "../../core/plugin_api.ts";
import { allEntities } from "./text.ts";

// Look-alike letters mapped to the ASCII letter they imitate.
const CONFUSABLE: Record<string, string> = {
  "а": "a",
  "е": "e",
  "о": "o",
  "р": "p",
  "с": "c",
  "х": "x",
  "у": "y",
  "і": "i",
  "ѕ": "s",
  "ј": "j",
  "ο": "o",
  "α": "a",
  "ε": "e",
  "ι": "i",
  "ν": "v",
  "ρ": "p",
  "0": "o",
  "1": "l",
  "i": "l",
};

/** A name reduced to what it looks like: case, separators and confusables folded. */
export function skeleton(name: string): string {
  return [...name.toLowerCase().normalize("NFKC")].map((c) => CONFUSABLE[c] ?? c).join("")
    .replace(/[^a-z0-9\u0080-\uffff]/g, "");
}

/** Levenshtein distance, stopping early above 2. */
function distance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3;
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row.push(
        Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)),
      );
    }
    prev = row;
  }
  return prev[b.length]!;
}

/** Tool names shared or imitated across servers. */
export const toolNameCollision: ScannerRule = {
  id: "tool-name-collision",
  severity: "medium",
  description: "The same tool name, or a look-alike (typosquat), on two servers of the fleet",
  check(model) {
    const findings: RuleFinding[] = [];
    const tools = allEntities(model).filter((e) => e.kind === "tool");
    for (let i = 0; i < tools.length; i++) {
      for (let j = 0; j < i; j++) {
        const a = tools[j]!, b = tools[i]!;
        if (a.server === b.server) continue;
        const finding = compare(a, b);
        if (finding) findings.push(finding);
      }
    }
    return findings;
  },
};

function compare(first: ScanEntity, second: ScanEntity): RuleFinding | undefined {
  const where = `"${first.name}" of server "${first.server}"`;
  const base = { entity: second, pointer: `${second.pointer}/name`, evidence: second.name };
  if (first.name === second.name) {
    return { ...base, severity: "low", message: `has the same name as ${where}` };
  }
  const a = skeleton(first.name), b = skeleton(second.name);
  if (a === b) {
    return { ...base, severity: "high", message: `looks like ${where} (typosquat)` };
  }
  if (a.length >= 6 && distance(a, b) === 1) {
    return { ...base, message: `differs by one character from ${where} (possible typosquat)` };
  }
  return undefined;
}
