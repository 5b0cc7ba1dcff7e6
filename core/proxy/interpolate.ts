/**
 * `${VAR}` and `${VAR:-default}` interpolation for config values, with `$$` for a literal `$`.
 *
 * Secrets such as API tokens belong in the environment, not in the fleet file; interpolation is
 * how the file refers to them. The syntax is the POSIX-shell subset that docker compose users
 * already know, so there is nothing new to learn and nothing surprising: one pass, no nesting.
 * @module
 */

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A reference to a variable the entry may not use; the message says why and what to do. */
export class RefusedVariableError extends Error {
  override readonly name = "RefusedVariableError";
  /** The variable that was refused. */
  readonly variable: string;

  constructor(variable: string, message: string) {
    super(message);
    this.variable = variable;
  }
}

/**
 * Whether `name` is one of the gateway's own variables (`MCP_*`: its auth secrets, approval
 * secret, tokens and settings), which only the operator's own hand-written entries may reference.
 */
export function isGatewayVariable(name: string): boolean {
  return /^MCP_/i.test(name);
}

const HOW =
  "write ${NAME} or ${NAME:-default} (NAME is letters, digits and _), or $$ for a literal $";

/**
 * Replaces `${VAR}` and `${VAR:-default}` in `text` with values from `env`; `$$` becomes `$`.
 *
 * `${VAR}` takes the value even when it is empty; `${VAR:-default}` takes `default` when `VAR` is
 * unset or empty, as in the shell. A `$` not followed by `{` or `$` stays as written. Substituted
 * values are not scanned again, so a value containing `${...}` is inserted verbatim.
 *
 * For each reference to an unset variable without a default, `onMissing` is called with the
 * variable's name and the reference stays in the result as written, so the caller decides
 * whether that is an error. A malformed reference (unclosed, bad name, nested) throws a
 * `SyntaxError` that quotes it.
 *
 * `refuse`, when given, is asked about every variable a reference names, before its value is
 * looked up: a reason it returns throws a {@link RefusedVariableError} with that reason, so a
 * value the caller may not use is never read, not even into a default.
 */
export function interpolate(
  text: string,
  env: Record<string, string | undefined>,
  onMissing: (name: string) => void,
  refuse?: (name: string) => string | undefined,
): string {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const dollar = text.indexOf("$", i);
    if (dollar === -1) {
      out += text.slice(i);
      break;
    }
    out += text.slice(i, dollar);
    const next = text[dollar + 1];
    if (next === "$") {
      out += "$";
      i = dollar + 2;
      continue;
    }
    if (next !== "{") {
      out += "$";
      i = dollar + 1;
      continue;
    }
    const close = text.indexOf("}", dollar + 2);
    if (close === -1) {
      throw new SyntaxError(
        `Unclosed variable reference "${text.slice(dollar)}"; close it with }, or ${HOW}`,
      );
    }
    const reference = text.slice(dollar, close + 1);
    const body = text.slice(dollar + 2, close);
    const split = body.indexOf(":-");
    const name = split === -1 ? body : body.slice(0, split);
    const fallback = split === -1 ? undefined : body.slice(split + 2);
    if (!NAME.test(name) || fallback?.includes("${")) {
      throw new SyntaxError(`Malformed variable reference "${reference}"; ${HOW}`);
    }
    const refused = refuse?.(name);
    if (refused !== undefined) throw new RefusedVariableError(name, refused);
    const value = env[name];
    if (fallback !== undefined) {
      out += value === undefined || value === "" ? fallback : value;
    } else if (value === undefined) {
      onMissing(name);
      out += reference;
    } else {
      out += value;
    }
    i = close + 1;
  }
  return out;
}
