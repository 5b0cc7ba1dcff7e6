/**
 * Opaque pagination cursors for every MCP list.
 * @module
 */
import { GatewayError } from "./errors.ts";

/** One page of a list and the cursor of the next page, if any. */
export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

/** Returns the page that `cursor` points at; an unreadable cursor is `invalid_cursor`. */
export function paginate<T>(
  items: readonly T[],
  cursor: string | undefined,
  size: number,
): Page<T> {
  const offset = cursor === undefined ? 0 : decodeCursor(cursor);
  const end = offset + size;
  const page: Page<T> = { items: items.slice(offset, end) };
  if (end < items.length) page.nextCursor = encodeCursor(end);
  return page;
}

function encodeCursor(offset: number): string {
  return btoa(JSON.stringify({ o: offset })).replaceAll("=", "");
}

function decodeCursor(cursor: string): number {
  try {
    const value = JSON.parse(atob(cursor)) as { o?: unknown };
    if (typeof value.o === "number" && Number.isSafeInteger(value.o) && value.o >= 0) {
      return value.o;
    }
  } catch {
    // fall through to the error below
  }
  throw new GatewayError(
    "invalid_cursor",
    `Invalid cursor "${
      cursor.slice(0, 40)
    }": pass back the nextCursor of the previous page unchanged`,
  );
}
