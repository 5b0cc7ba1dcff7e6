import assert from "node:assert/strict";
import { ManualClock } from "./clock.ts";
import { LOG_WINDOW_MS, LogRateWindow } from "./log_rate_window.ts";

function window(perWindow: number) {
  const clock = new ManualClock(1_000);
  const reports: number[] = [];
  const bound = new LogRateWindow(perWindow, clock, (n) => reports.push(n));
  const burst = (n: number) =>
    Array.from({ length: n }, () => bound.admit()).filter(Boolean).length;
  return { clock, reports, bound, burst };
}

Deno.test("At most the bound is admitted in one window; the rest are held back", () => {
  const { burst, reports } = window(3);
  assert.equal(burst(10), 3);
  assert.deepEqual(reports, []);
});

Deno.test("Lines held back are reported once, when their window ends, though no line follows", () => {
  const { clock, burst, reports } = window(3);
  burst(10);
  clock.advance(LOG_WINDOW_MS - 1);
  assert.deepEqual(reports, []);
  clock.advance(1);
  assert.deepEqual(reports, [7]);
  clock.advance(5 * LOG_WINDOW_MS);
  assert.deepEqual(reports, [7]);
});

Deno.test("A new window admits the bound again", () => {
  const { clock, burst, reports } = window(3);
  burst(5);
  clock.advance(LOG_WINDOW_MS);
  assert.equal(burst(5), 3);
  clock.advance(LOG_WINDOW_MS);
  assert.deepEqual(reports, [2, 2]);
});

Deno.test("Closing reports what is held back and leaves no timer", () => {
  const { clock, burst, reports, bound } = window(1);
  burst(4);
  bound.close();
  assert.deepEqual(reports, [3]);
  clock.advance(LOG_WINDOW_MS);
  assert.deepEqual(reports, [3]);
});
