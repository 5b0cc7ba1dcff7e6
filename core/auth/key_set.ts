/**
 * An identity provider's JSON Web Key Set, fetched by the gateway itself and kept. jose's remote
 * key set times its refetch pause from the last fetch that succeeded, so once a fetch failed
 * (the provider down, or rate-limiting) every token with an unknown `kid` fetched again, and after
 * ten minutes it dropped the keys it had, refusing every valid token while the provider was down.
 * Here the pause runs from the last attempt, whatever its outcome, a failed refresh keeps the
 * keys last read, and the document is read with a deadline and a size bound.
 * @module
 */
import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from "jose";
import { type Clock, systemClock } from "../support/clock.ts";
import { boundedFetch } from "./bounded_fetch.ts";

/** How long one key-set request may take, in ms. */
export const KEY_SET_TIMEOUT_MS = 5_000;
/** How long keys are used before the next token fetches them again (a failure keeps them), in ms. */
export const KEY_SET_MAX_AGE_MS = 10 * 60_000;

/** Where the keys are and how often they may be fetched. */
export interface KeySetOptions {
  url: URL;
  /** Least time between two fetches, whatever the first one's outcome, in ms. */
  cooldownMs: number;
  maxAgeMs?: number;
  fetch?: typeof fetch;
  /** Times the pauses (ms, any origin). */
  now: () => number;
  /** Times each request's deadline. */
  clock?: Clock;
}

/** A key lookup for jose's `jwtVerify` over the key set at `options.url`. */
export function keySet(options: KeySetOptions): JWTVerifyGetKey {
  const { url, cooldownMs, now } = options;
  const maxAgeMs = options.maxAgeMs ?? KEY_SET_MAX_AGE_MS;
  const get = boundedFetch(
    options.fetch ?? fetch,
    KEY_SET_TIMEOUT_MS,
    options.clock ?? systemClock,
  );
  let keys: JWTVerifyGetKey | undefined;
  let readAt = -Infinity;
  let triedAt = -Infinity;
  let failure: Error | undefined;
  let pending: Promise<boolean> | undefined;

  const load = async (): Promise<JWTVerifyGetKey> => {
    let document: unknown;
    try {
      const response = await get(url.href, { headers: { accept: "application/json" } });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      document = await response.json();
    } catch (e) {
      throw new Error(`Cannot read the key set ${url.href}: ${e instanceof Error ? e.message : e}`);
    }
    try {
      return createLocalJWKSet(document as JSONWebKeySet);
    } catch {
      throw new Error(`${url.href} is not a JSON Web Key Set (an object with a "keys" list)`);
    }
  };
  /** Fetches the keys unless one fetch is under way (joined) or was tried within the cooldown. */
  const refresh = (): Promise<boolean> => {
    if (pending) return pending;
    if (now() - triedAt < cooldownMs) return Promise.resolve(false);
    triedAt = now();
    pending = load().then((loaded) => {
      keys = loaded;
      readAt = now();
      failure = undefined;
      return true;
    }, (e: Error) => {
      failure = e;
      return false;
    }).finally(() => pending = undefined);
    return pending;
  };

  return async (header, token) => {
    if (keys === undefined || now() - readAt >= maxAgeMs) await refresh();
    if (keys === undefined) throw failure ?? new Error(`The key set ${url.href} is not read yet`);
    try {
      return await keys(header, token);
    } catch (e) {
      // A key the set does not hold may have been published since (rotation): fetch once more.
      if (!(e instanceof errors.JWKSNoMatchingKey) || !(await refresh())) throw e;
      return await keys(header, token);
    }
  };
}
