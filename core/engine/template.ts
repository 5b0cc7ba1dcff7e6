/**
 * `{{path}}` templates shared by skills, workflows and agents: a placeholder names a dotted path
 * into a scope (`{{inputs.topic}}`, `{{steps.save.text}}`).
 * @module
 */

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;
const WHOLE = /^\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}$/;

/** The value at a dotted path, or undefined when any segment is missing. */
export function lookup(scope: unknown, path: string): unknown {
  let value: unknown = scope;
  for (const key of path.split(".")) {
    if (typeof value !== "object" || value === null || !Object.hasOwn(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/** Every placeholder path in a template, in order. */
export function placeholders(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)].map((m) => m[1]!);
}

/**
 * Fills a string: a string that is exactly one placeholder yields the value itself (so a list or
 * a number passes through to a tool's arguments unchanged); otherwise values are interpolated,
 * non-strings as JSON and missing ones as "".
 */
export function renderString(template: string, scope: unknown): unknown {
  const whole = WHOLE.exec(template);
  if (whole) return lookup(scope, whole[1]!);
  return template.replace(PLACEHOLDER, (_, path: string) => {
    const value = lookup(scope, path);
    if (value === undefined || value === null) return "";
    return typeof value === "string" ? value : JSON.stringify(value);
  });
}

/** Fills every string inside a JSON-like value (objects and lists are walked). */
export function renderValue(value: unknown, scope: unknown): unknown {
  if (typeof value === "string") return renderString(value, scope);
  if (Array.isArray(value)) return value.map((v) => renderValue(v, scope));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, renderValue(v, scope)]),
    );
  }
  return value;
}

/**
 * Evaluates a `when` condition: `{{path}}` (truthy), `not {{path}}`, or `{{path}} == value` /
 * `!= value` (compared as text). Deliberately tiny: workflows are data, not a language.
 */
export function evaluateWhen(condition: string, scope: unknown): boolean {
  const text = condition.trim();
  const negated = /^not\s+/.exec(text);
  if (negated) return !evaluateWhen(text.slice(negated[0].length), scope);
  const comparison = /^(.*?)\s*(==|!=)\s*(.*)$/.exec(text);
  if (comparison) {
    const left = textOf(renderString(comparison[1]!, scope));
    const right = textOf(renderString(unquote(comparison[3]!), scope));
    return comparison[2] === "==" ? left === right : left !== right;
  }
  return truthy(renderString(text, scope));
}

function unquote(text: string): string {
  return /^(["']).*\1$/.test(text) ? text.slice(1, -1) : text;
}

function textOf(value: unknown): string {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function truthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === "string") return value !== "" && value !== "false" && value !== "0";
  return Boolean(value);
}
