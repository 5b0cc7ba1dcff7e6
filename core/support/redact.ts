/**
 * The one redaction function: what every diagnostic sink (the logger, the event bus, errors sent
 * to clients, the operator API, metrics labels) passes its text through before it leaves.
 *
 * Two layers. Patterns catch credentials by shape wherever they come from: URL userinfo, the value
 * of a secret-named query parameter, flag or variable (`?token=…`, `--api-key …`, `API_KEY=…`),
 * `Bearer …`/`Basic …`, and well-known API key prefixes. Values catch what no shape reveals: the
 * concrete secrets of the running gateway (its tokens, the resolved fleet's header and env values,
 * URL passwords and query values, secret arguments) are registered here when loaded and scrubbed
 * from any string, whatever message carries them.
 * @module
 */

/** What a secret is replaced with. */
export const REDACTED = "[redacted]";

/** Names (of variables, flags, query parameters, headers) that mark a value as a credential. */
export const SECRET_NAME = /SECRET|TOKEN|PASSW|KEY|CREDENTIAL|AUTH|PRIVATE|SIGNATURE/i;

/**
 * Registered values shorter than this are not scrubbed as values (too likely to be ordinary words
 * or numbers); the patterns still apply to them.
 */
export const MIN_SECRET_LENGTH = 8;

// Prefixes of API keys (OpenAI, Anthropic, Stripe, GitHub, Slack, AWS, GitLab, Google).
const KEY_PREFIX =
  /^(sk-|sk_|rk_|ghp_|gho_|ghs_|ghu_|ghr_|github_pat_|xox[abpr]-|AKIA[0-9A-Z]{12}|glpat-|AIza)/;
// The same shapes inside free text, with enough of a tail that ordinary words do not match.
const KEY_IN_TEXT =
  /\b(?:sk-[A-Za-z0-9_-]{12,}|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|xox[abpr]-[A-Za-z0-9-]{8,}|AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,})/g;
// scheme://userinfo@ — the whole userinfo goes (a token is often the user name alone).
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>]+@/gi;
// NAME=value where NAME says secret: query parameters, --flag=value, env dumps.
const NAMED_ASSIGNMENT =
  /\b((?:[A-Za-z_][\w.-]*)?(?:SECRET|TOKEN|PASSW|KEY|CREDENTIAL|AUTH|PRIVATE|SIGNATURE)[\w.-]*)=(?!\[redacted\])[^\s&"',;)}\]]+/gi;
// "name": "value" in JSON text (a stack or body quoted in a message).
const NAMED_JSON =
  /("[\w.-]*(?:secret|token|passw|api[_-]?key|credential|authorization|private[_-]?key)[\w.-]*"\s*:\s*")(?!\[redacted\])(?:[^"\\]|\\.)+"/gi;
// --api-key VALUE: the word after a secret-named flag.
const NAMED_FLAG =
  /(\s--?[\w.-]*(?:secret|token|passw|key|credential|auth|private)[\w.-]*\s+)(?![-[])[^\s"']+/gi;
// An Authorization header's credentials.
// (a credential has a digit or symbol: "Bearer token" in a sentence is no credential).
const SCHEME_CREDENTIALS =
  /\b(Bearer|Basic)\s+(?!\[redacted\])(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}/g;

const owners = new Map<unknown, Set<string>>();
let matcher: RegExp | null = null;
/**
 * Bumped whenever the registered secrets change: the matcher, and what {@link redactRepeated}
 * keeps, are rebuilt when theirs is older.
 */
let generation = 0;
let matcherGeneration = 0;

/**
 * Registers `values` as secrets under `owner`, replacing what that owner registered before (so a
 * fleet reload replaces the previous fleet's values). Forms a value takes in text are added too:
 * URL-encoded and JSON-escaped.
 */
export function registerSecrets(owner: unknown, values: Iterable<string>): void {
  const set = new Set<string>();
  for (const value of values) {
    if (typeof value !== "string" || value.length < MIN_SECRET_LENGTH) continue;
    set.add(value);
    set.add(encodeURIComponent(value));
    set.add(JSON.stringify(value).slice(1, -1));
  }
  if (set.size === 0) owners.delete(owner);
  else owners.set(owner, set);
  generation++;
}

/** Forgets the secrets `owner` registered (a stopped gateway). */
export function forgetSecrets(owner: unknown): void {
  if (owners.delete(owner)) generation++;
}

function secretMatcher(): RegExp | null {
  if (matcherGeneration === generation) return matcher;
  matcherGeneration = generation;
  const all = new Set<string>();
  for (const set of owners.values()) for (const value of set) all.add(value);
  // Longest first, so a secret containing another is replaced whole.
  const sorted = [...all].sort((a, b) => b.length - a.length);
  matcher = sorted.length === 0
    ? null
    : new RegExp(sorted.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "g");
  return matcher;
}

/** `text` with every registered secret and every credential-shaped substring replaced. */
export function redact(text: string): string {
  const values = secretMatcher();
  let out = values === null ? text : text.replace(values, REDACTED);
  // The patterns are cheap to skip: most diagnostics hold none of their anchors.
  if (out.includes("://")) out = out.replace(USERINFO, `$1${REDACTED}@`);
  if (out.includes("=")) out = out.replace(NAMED_ASSIGNMENT, `$1=${REDACTED}`);
  if (out.includes('"')) out = out.replace(NAMED_JSON, `$1${REDACTED}"`);
  if (out.includes("-")) out = out.replace(NAMED_FLAG, `$1${REDACTED}`);
  out = out.replace(SCHEME_CREDENTIALS, `$1 ${REDACTED}`).replace(KEY_IN_TEXT, REDACTED);
  return out;
}

/** How long a secret's beginning left at a cut must be to count as a leak. */
const MIN_LEAKED_PREFIX = 4;

/**
 * `text` redacted and only then cut to `max` characters, so a secret crossing the cut leaves no
 * prefix. `alreadyCut`: the text was truncated before it got here (by a worker, which holds no
 * secrets to redact with), so a registered secret's beginning at its very end is redacted too.
 */
export function redactCut(text: string, max: number, alreadyCut = false): string {
  let out = redact(text);
  if (alreadyCut) out = redactTrailingPrefix(out);
  return out.length > max ? out.slice(0, max) : out;
}

function redactTrailingPrefix(text: string): string {
  let longest = 0;
  for (const set of owners.values()) {
    for (const secret of set) {
      for (let k = Math.min(secret.length - 1, text.length); k > longest; k--) {
        if (k >= MIN_LEAKED_PREFIX && text.endsWith(secret.slice(0, k))) {
          longest = k;
          break;
        }
      }
    }
  }
  return longest === 0 ? text : text.slice(0, text.length - longest) + REDACTED;
}

/**
 * A copy of `value` with every string in it redacted (object keys stay); non-plain objects are
 * copied through their enumerable fields, errors become their redacted message.
 */
export function redactDeep<T>(value: T, depth = 0): T {
  if (typeof value === "string") return redact(value) as T;
  if (value === null || typeof value !== "object") return value;
  if (depth > 32) return REDACTED as T;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, depth + 1)) as T;
  if (value instanceof Error) return redact(value.message) as T;
  if (value instanceof Date || ArrayBuffer.isView(value)) return value; // no text to hide
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = redactDeep(v, depth + 1);
  return out as T;
}

/** A URL without its userinfo and query values (tokens often travel there). */
export function redactUrl(text: string): string {
  const url = URL.parse(text);
  if (url === null) return redact(text);
  if (url.username || url.password) {
    url.username = REDACTED;
    url.password = "";
  }
  for (const key of [...new Set(url.searchParams.keys())]) url.searchParams.set(key, REDACTED);
  return url.href;
}

const FLAG = /^--?([A-Za-z0-9][\w.-]*)$/;
const FLAG_WITH_VALUE = /^(--?[A-Za-z0-9][\w.-]*)=(.*)$/s;

/** Whether argument `i` of a command line holds a secret by its shape or the flag before it. */
function isSecretArg(args: readonly string[], i: number): boolean {
  const arg = args[i]!;
  const previous = i > 0 ? FLAG.exec(args[i - 1]!) : null;
  if (previous && SECRET_NAME.test(previous[1]!) && !arg.startsWith("-")) return true;
  return KEY_PREFIX.test(arg);
}

/**
 * A command line with its secrets redacted: the value of a flag whose name says it holds one
 * (`--api-key X`, `--token=X`), URL credentials and query values, and arguments shaped like
 * well-known API keys. Flag names and everything else stay, so the operator still sees the command.
 */
export function redactArgs(args: readonly string[]): string[] {
  return args.map((arg, i) => {
    const assigned = FLAG_WITH_VALUE.exec(arg);
    if (assigned && SECRET_NAME.test(assigned[1]!)) return `${assigned[1]}=${REDACTED}`;
    if (isSecretArg(args, i)) return REDACTED;
    return arg.includes("://") ? redactUrl(arg) : redact(arg);
  });
}

/** The secret parts of a URL: userinfo and every query value. */
function urlSecrets(text: string): string[] {
  const url = URL.parse(text);
  if (url === null) return [];
  const out = [...url.searchParams.values()];
  for (const part of [url.username, url.password]) {
    if (part) out.push(part, decodeURIComponent(part));
  }
  return out;
}

/** The values in a fleet entry that are secrets, for {@link registerSecrets}. */
export function serverSecrets(server: {
  url?: string;
  headers: Record<string, string>;
  env: Record<string, string>;
  command?: string[];
  tenants?: Record<string, { headers: Record<string, string>; env: Record<string, string> }>;
}): string[] {
  const out: string[] = [];
  // Each tenant's own credentials are secrets like the entry's.
  for (const own of Object.values(server.tenants ?? {})) {
    out.push(...serverSecrets({ headers: own.headers, env: own.env }));
  }
  if (server.url !== undefined) out.push(...urlSecrets(server.url));
  for (const value of Object.values(server.headers)) {
    out.push(value);
    // "Bearer X": the credentials alone appear in messages too.
    const credentials = /^\S+\s+(\S.*)$/.exec(value)?.[1];
    if (credentials) out.push(credentials);
  }
  // Every env value: the fleet passes a child what it needs, and what it needs is mostly keys.
  out.push(...Object.values(server.env));
  const args = server.command ?? [];
  args.forEach((arg, i) => {
    const assigned = FLAG_WITH_VALUE.exec(arg);
    if (assigned && SECRET_NAME.test(assigned[1]!)) out.push(assigned[2]!);
    else if (isSecretArg(args, i)) out.push(arg);
    if (arg.includes("://")) out.push(...urlSecrets(arg.slice(arg.indexOf("=") + 1)));
  });
  return out;
}

const REPEATED_MAX = 1_024;
/** Longer texts are redacted each time: the cache holds at most 1,024 × 512 characters. */
const REPEATED_MAX_LENGTH = 512;
const repeated = new Map<string, string>();
let repeatedGeneration = 0;

/**
 * {@link redact} for a text that comes back call after call (the policy rule of each decision):
 * the result is kept until the registered secrets change, for at most 1,024 texts. Six regular
 * expressions over the same rule on every call were ~4 µs of each call's CPU.
 */
export function redactRepeated(text: string): string {
  if (text.length > REPEATED_MAX_LENGTH) return redact(text);
  if (repeatedGeneration !== generation) {
    repeated.clear();
    repeatedGeneration = generation;
  }
  let out = repeated.get(text);
  if (out === undefined) {
    out = redact(text);
    if (repeated.size >= REPEATED_MAX) repeated.delete(repeated.keys().next().value!);
    repeated.set(text, out);
  }
  return out;
}
