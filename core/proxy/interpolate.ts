/**
 * `${VAR}` and `${VAR:-default}` interpolation for config values, with `$$` for a literal `$`.
 *
 * Secrets such as API tokens belong in the environment, not in the fleet file; interpolation is
 * how the file refers to them. The syntax is the POSIX-shell subset that docker compose users
 * already know, so there is nothing new to learn and nothing surprising: one pass, no nesting.
 * @module
 */

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

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
 */
export function interpolate(
  text: string,
  env: Record<string, string | undefined>,
  onMissing: (name: string) => void,
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
