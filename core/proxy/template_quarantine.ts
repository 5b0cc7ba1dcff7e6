/**
 * Reads through a quarantined resource template: a URI no listed resource has is refused when it
 * is an instance (RFC 6570, matched by the SDK's UriTemplate) of a template the scanner
 * quarantined, or the read would reach exactly what the quarantine hides.
 * @module
 */
import { ResourceTemplate as SdkTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { ResourceTemplate } from "@modelcontextprotocol/sdk/types.js";

/** The SDK's RFC 6570 template (reached through the class that wraps it). */
type UriTemplate = SdkTemplate["uriTemplate"];

/** Most compiled templates kept; catalogs are bounded, this keeps a churning one bounded too. */
const MAX_COMPILED = 1024;
const compiled = new Map<string, UriTemplate | Error>();

function compile(template: string): UriTemplate | Error {
  let known = compiled.get(template);
  if (known === undefined) {
    try {
      known = new SdkTemplate(template, { list: undefined }).uriTemplate;
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
    let matches = true;
    if (!(matcher instanceof Error)) {
      try {
        matches = matcher.match(uri) !== null;
      } catch {
        matches = true;
      }
    }
    if (matches) return `${reason} (its template "${template.uriTemplate}" matches this URI)`;
  }
  return undefined;
}
