/**
 * Reads through a quarantined resource template: a URI no listed resource has is refused when it
 * is an instance (RFC 6570) of a template the scanner quarantined, or the read would reach
 * exactly what the quarantine hides.
 *
 * The instance check is the SDK's UriTemplate's own regular expression, built by its parser, but
 * matched in linear time (support/linear_pattern.ts): the SDK's `match` runs it with V8's
 * backtracking engine, where adjacent variables (`x{a}{b}{c}{d}`, an upstream's choice) take time
 * polynomial in the URI (a caller's choice) — 400 characters took 10 s with four, and every further
 * variable multiplies it, on the gateway's main thread.
 * @module
 */
import { ResourceTemplate as SdkTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { ResourceTemplate } from "@modelcontextprotocol/sdk/types.js";
import { type LinearPattern, linearPattern } from "../support/linear_pattern.ts";

/** Most compiled templates kept; catalogs are bounded, this keeps a churning one bounded too. */
const MAX_COMPILED = 1024;
const compiled = new Map<string, LinearPattern | Error>();

/** What the SDK's UriTemplate builds its `match` expression from (members it keeps private). */
interface SdkTemplateParts {
  parts?: readonly unknown[];
  partToRegExp?(part: unknown): readonly { pattern: string }[];
  escapeRegExp?(text: string): string;
}

/**
 * The SDK's expression for instances of `template` (`^…$`, as its `match` builds it). Throws when
 * the template does not parse, or when the SDK no longer has the members read here (a test pins
 * them: an upgrade that moves them fails it, and until fixed such reads are refused).
 */
export function instancePattern(template: string): string {
  const sdk = new SdkTemplate(template, { list: undefined })
    .uriTemplate as unknown as SdkTemplateParts;
  const { parts } = sdk;
  if (!Array.isArray(parts) || !sdk.partToRegExp || !sdk.escapeRegExp) {
    throw new Error("the SDK's UriTemplate no longer exposes parts, partToRegExp and escapeRegExp");
  }
  let source = "^";
  for (const part of parts) {
    source += typeof part === "string"
      ? sdk.escapeRegExp(part)
      : sdk.partToRegExp(part).map((p) => p.pattern).join("");
  }
  return source + "$";
}

function compile(template: string): LinearPattern | Error {
  let known = compiled.get(template);
  if (known === undefined) {
    try {
      known = linearPattern(instancePattern(template));
    } catch (error) {
      known = error as Error;
    }
    if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!);
    compiled.set(template, known);
  }
  return known;
}

/**
 * Why `uri` is refused: the quarantine reason of the first template it is an instance of, among
 * those `reasonOf` says are quarantined; undefined when none. A quarantined template that cannot
 * be parsed refuses every such read (fail closed).
 */
export function quarantinedTemplateOf(
  uri: string,
  templates: readonly ResourceTemplate[],
  reasonOf: (template: ResourceTemplate) => string | undefined,
): string | undefined {
  for (const template of templates) {
    const reason = reasonOf(template);
    if (!reason) continue;
    const matcher = compile(template.uriTemplate);
    const matches = matcher instanceof Error || matcher.test(uri);
    if (matches) return `${reason} (its template "${template.uriTemplate}" matches this URI)`;
  }
  return undefined;
}
