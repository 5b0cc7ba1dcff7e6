/**
 * How deep a JSON value nests, found without recursion: a caller's arguments reach recursive code
 * (canonical JSON, ajv, redaction), which a few thousand levels would overflow.
 * @module
 */

/** Whether `value` nests more than `limit` levels of objects and arrays (`{}` is one level). */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const values: unknown[] = [value];
  const depths: number[] = [0];
  while (values.length > 0) {
    const next = values.pop();
    const depth = depths.pop()!;
    if (next === null || typeof next !== "object") continue;
    if (depth + 1 > limit) return true;
    for (const item of Array.isArray(next) ? next : Object.values(next)) {
      if (item !== null && typeof item === "object") {
        values.push(item);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}
