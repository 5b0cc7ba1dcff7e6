/**
 * The plugin API's clock, importable alone (it imports nothing else), so a worker relay can time
 * out through it without loading the facade: the real clock and the deadline, wait and repeat
 * helpers every plugin times with.
 * @module
 */
export { deadline, every, pause, settlesWithin, systemClock } from "../support/clock.ts";
export type { Clock, Deadline, TimerHandle } from "../support/clock.ts";
