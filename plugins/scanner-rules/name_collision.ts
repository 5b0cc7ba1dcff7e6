/**
 * Rule tool-name-collision: the same or a look-alike tool name on two servers, which lets one
 * server capture calls meant for the other.
 * @module
 */
import type { RuleFinding, ScanEntity, ScannerRule } from "../../core/plugin_api/mod.ts";
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

/** How many earlier tools one tool is compared with per shared key: a bound on crafted fleets. */
const MAX_CANDIDATES = 32;
/** Longer names are compared for equality only. */
const MAX_FUZZY_LENGTH = 64;

/** Tool names shared or imitated across servers. */
export const toolNameCollision: ScannerRule = {
  id: "tool-name-collision",
  severity: "medium",
  description: "The same tool name, or a look-alike (typosquat), on two servers of the fleet",
  check(model) {
    const findings: RuleFinding[] = [];
    // Candidates by key (the skeleton and each one-deletion variant of it), so a fleet is
    // compared in linear time instead of every pair of tools.
    const byKey = new Map<string, { entity: ScanEntity; skeleton: string }[]>();
    for (const entity of allEntities(model)) {
      if (entity.kind !== "tool") continue;
      const mine = skeleton(entity.name);
      const keys = variants(mine);
      const seen = new Set<ScanEntity>();
      for (const k of keys) {
        for (const earlier of byKey.get(k) ?? []) {
          if (seen.has(earlier.entity) || earlier.entity.server === entity.server) continue;
          seen.add(earlier.entity);
          const finding = compare(earlier.entity, earlier.skeleton, entity, mine);
          if (finding) findings.push(finding);
        }
      }
      for (const k of keys) {
        const list = byKey.get(k) ?? [];
        if (list.length < MAX_CANDIDATES) list.push({ entity, skeleton: mine });
        byKey.set(k, list);
      }
    }
    return findings;
  },
};

/** The skeleton and its one-deletion variants: two names within one edit share one of these. */
function variants(skeleton: string): string[] {
  const keys = new Set([skeleton]);
  if (skeleton.length > MAX_FUZZY_LENGTH) return [...keys];
  for (let i = 0; i < skeleton.length; i++) {
    keys.add(skeleton.slice(0, i) + skeleton.slice(i + 1));
  }
  return [...keys];
}

/** A name with case and separators folded, but no look-alike letters. */
function plain(name: string): string {
  return name.toLowerCase().normalize("NFKC").replace(/[^a-z0-9\u0080-\uffff]/g, "");
}

function compare(
  first: ScanEntity,
  a: string,
  second: ScanEntity,
  b: string,
): RuleFinding | undefined {
  const where = `"${first.name}" of server "${first.server}"`;
  const base = { entity: second, pointer: `${second.pointer}/name`, evidence: second.name };
  if (first.name === second.name) {
    return { ...base, severity: "low", message: `has the same name as ${where}` };
  }
  if (a === b) {
    // Case and separators differ between honest servers ("list_files", "listFiles"); look-alike
    // letters from another script do not.
    return plain(first.name) !== plain(second.name)
      ? { ...base, severity: "high", message: `looks like ${where} (typosquat)` }
      : { ...base, message: `differs from ${where} only in case or separators` };
  }
  if (a.length >= 6 && distance(a, b) === 1) {
    return { ...base, message: `differs by one character from ${where} (possible typosquat)` };
  }
  return undefined;
}
