/**
 * How large and how deep a JSON value is, found without recursion and without walking past the
 * limit asked about: a caller's arguments reach recursive code (canonical JSON, ajv, redaction),
 * which a few thousand levels would overflow, and costs that grow with their size.
 * @module
 */

/**
 * How many JSON values `value` holds (itself included), counting no further than `limit`: the
 * count, or `limit` when there are at least that many.
 */
export function countValues(value: unknown, limit: number): number {
  let count = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0 && count < limit) {
    const next = pending.pop();
    count++;
    if (next !== null && typeof next === "object") {
      for (const item of Array.isArray(next) ? next : Object.values(next)) {
        // Past what could still be counted, the rest need not be queued.
        if (count + pending.length >= limit) return limit;
        pending.push(item);
      }
    }
  }
  return count;
}

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
