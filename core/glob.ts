/**
 * Name globs (`*` any run of characters, `?` one character), compiled once into matchers.
 * @module
 */

/** A compiled glob: true when a name matches. */
export type GlobMatcher = (name: string) => boolean;

/** Compiles one glob; every other character matches itself. */
export function compileGlob(glob: string): GlobMatcher {
  const source = [...glob].map((c) => {
    if (c === "*") return "[\\s\\S]*";
    if (c === "?") return "[\\s\\S]";
    // No "-" in the class: outside a character class it is literal, and under the u flag "\-" is an error.
    return c.replace(/[.+^${}()|[\]\\/]/g, "\\$&");
  }).join("");
  const regex = new RegExp(`^${source}$`, "u");
  return (name) => regex.test(name);
}

/** Compiles a list of globs into one matcher that is true when any glob matches. */
export function compileGlobs(globs: readonly string[]): GlobMatcher {
  const matchers = globs.map(compileGlob);
  return (name) => matchers.some((m) => m(name));
}

/** An allow/deny filter: denied names never pass; with any allow glob, only allowed names pass. */
export function compileAllowDeny(allow: readonly string[], deny: readonly string[]): GlobMatcher {
  const allowed = compileGlobs(allow);
  const denied = compileGlobs(deny);
  return (name) => !denied(name) && (allow.length === 0 || allowed(name));
}
