/**
 * Which resource a URI names, as the upstream will read it. Upstreams built on the MCP SDK look a
 * resource up by `new URL(uri)`, which lower-cases the scheme, resolves `.` and `..` segments
 * (`%2e` too) and drops tabs and newlines; policies and the scanner's quarantine match the text
 * the client sent. Were the two allowed to differ, `notes://x/public/../secret` would pass a
 * deny on `notes://x/secret*` and `FILES://x/etc/passwd` a quarantined `files://{+path}`.
 * @module
 */

/** Why `uri` would be read as another resource than its text names; undefined when it would not. */
export function resolvedUriProblem(uri: string): string | undefined {
  if (!URL.canParse(uri)) return undefined;
  const href = new URL(uri).href;
  // An empty path gains a slash ("https://a.example" → ".../"): the same resource.
  if (href === uri || href === `${uri}/`) return undefined;
  return `Resource URI ${JSON.stringify(uri)} resolves to ${JSON.stringify(href)}, which is ` +
    "what its server would read (dot segments, escapes, case or control characters differ); " +
    "ask for that URI as it is written";
}
