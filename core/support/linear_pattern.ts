/**
 * JSON Schema `pattern`s matched in linear time. The gateway checks callers' arguments against
 * patterns an upstream chose (its tools' `inputSchema`) and an operator wrote (policy argument
 * rules); V8's backtracking engine takes exponential time on some of them (`^(a+)+$` against 30
 * characters ran for seconds, 40 for hours), and it runs on the main thread, so one upstream's
 * pattern and one caller's string stopped every session of every tenant. Patterns are matched by
 * RE2 (re2js, a port of Go's and RE2/J's engine in plain JavaScript), whose time is linear in the
 * input whatever the pattern; V8's own fallback engine does not take the `u` flag JSON Schema
 * patterns need, and cannot be switched on at run time.
 *
 * RE2 runs the patterns JSON Schema recommends for interoperability and more (classes, `\p{…}`,
 * named groups, bounded and unbounded quantifiers); ECMAScript's own escapes are translated
 * (`\uXXXX`, `\u{…}`, `\cX`), and `\s`, `\S` and `.` keep ECMAScript's meaning (Unicode spaces;
 * `.` excludes every line terminator). What needs backtracking (lookaround, backreferences) is
 * refused with {@link LinearPatternError}, naming the construct.
 * @module
 */
import { RE2JS } from "re2js";

/** What to do about a pattern RE2 cannot run. */
export const LINEAR_PATTERN_FIX =
  "rewrite it in RE2's syntax (no lookaround, no backreferences, repeat counts up to 1000): the " +
  "gateway matches patterns with RE2 so that no input can stall it";

/** A pattern RE2 cannot run: lookaround, a backreference, or syntax neither engine knows. */
export class LinearPatternError extends Error {
  override name = "LinearPatternError";
  /** What in the pattern RE2 cannot run. */
  readonly reason: string;

  constructor(reason: string, pattern?: string) {
    super(
      pattern === undefined
        ? reason
        : `pattern ${JSON.stringify(pattern)} cannot be matched in linear time: ${reason}; ` +
          LINEAR_PATTERN_FIX,
    );
    this.reason = reason;
  }
}

/** ECMAScript's white space and line terminators (`\s`), as RE2 class members. */
const SPACE = "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" +
  "\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";
/**
 * Most RE2 instructions a pattern may compile to. Matching costs up to this much per character:
 * at 1,002, 178 ms for 1 MB that never matches, so 0.7 s for the largest message.
 */
export const MAX_PROGRAM_SIZE = 1_000;
/** What ECMAScript's `.` does not match without the `s` flag. */
const DOT = "[^\\n\\r\\x{2028}\\x{2029}]";
const HEX4 = /^[0-9A-Fa-f]{4}$/;
const BRACED_HEX = /^\{([0-9A-Fa-f]{1,6})\}/;

/**
 * The pattern in RE2 syntax with ECMAScript meaning, or a {@link LinearPatternError} naming what
 * RE2 cannot run.
 */
function toRe2Syntax(pattern: string): string {
  let out = "";
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "\\") {
      const next = pattern[i + 1];
      if (next === undefined) throw new LinearPatternError("it ends with a lone backslash");
      if (next === "u") {
        const braced = pattern.slice(i + 2).match(BRACED_HEX);
        const four = pattern.slice(i + 2, i + 6);
        if (braced) {
          out += `\\x{${braced[1]}}`;
          i += 1 + braced[0].length;
          continue;
        }
        if (HEX4.test(four)) {
          out += `\\x{${four}}`;
          i += 5;
          continue;
        }
      } else if (next === "c" && /^[A-Za-z]$/.test(pattern[i + 2] ?? "")) {
        out += `\\x{${(pattern.charCodeAt(i + 2) % 32).toString(16)}}`;
        i += 2;
        continue;
      } else if (next === "s") {
        out += inClass ? SPACE : `[${SPACE}]`;
        i++;
        continue;
      } else if (next === "S" && !inClass) {
        out += `[^${SPACE}]`;
        i++;
        continue;
      } else if (/[1-9]/.test(next) || (next === "k" && pattern[i + 2] === "<")) {
        throw new LinearPatternError(`it uses a backreference, \\${next}…`);
      }
      out += c + next;
      i++;
      continue;
    }
    if (inClass) {
      if (c === "]") inClass = false;
      out += c;
      continue;
    }
    if (c === "[") {
      // A leading `]` is literal in RE2 but closes the class in ECMAScript: `[]` matches
      // nothing and `[^]` any character.
      if (pattern[i + 1] === "]") throw new LinearPatternError("it has an empty class ([])");
      if (pattern.startsWith("^]", i + 1)) {
        out += "[\\x{0}-\\x{10FFFF}]";
        i += 2;
        continue;
      }
      inClass = true;
      out += c;
      continue;
    }
    if (c === "(" && pattern[i + 1] === "?") {
      const kind = pattern.slice(i + 2, i + 4);
      if (kind[0] === "=" || kind[0] === "!" || kind === "<=" || kind === "<!") {
        throw new LinearPatternError(
          `it uses a lookaround, (?${kind[0] === "<" ? kind : kind[0]}…)`,
        );
      }
    }
    out += c === "." ? DOT : c;
  }
  return out;
}

/** A compiled pattern: `test` searches the whole string, as JSON Schema's `pattern` does. */
export interface LinearPattern {
  test(text: string): boolean;
  toString(): string;
  /** RE2 instructions: each character of a text steps every live one. */
  readonly programSize: number;
}

/**
 * Compiles `pattern` (ECMAScript syntax, as JSON Schema writes it) to run in linear time; throws
 * {@link LinearPatternError} with what to change when RE2 cannot run it.
 */
export function linearPattern(pattern: string): LinearPattern {
  let re: RE2JS;
  try {
    re = RE2JS.compile(toRe2Syntax(pattern));
  } catch (error) {
    const why = error instanceof LinearPatternError
      ? error.reason
      : (error as Error).message.replace(/^error parsing regexp: /, "");
    throw new LinearPatternError(why, pattern);
  }
  // Linear in the input, but each character steps every live instruction: `[a-z]{1000}` repeated
  // 60 times (660 characters, 60,002 instructions) took 47 s on 1 MB.
  if (re.programSize() > MAX_PROGRAM_SIZE) {
    throw new LinearPatternError(
      `it compiles to ${re.programSize()} RE2 instructions, over ${MAX_PROGRAM_SIZE} ` +
        "(repeat counts multiply: [a-z]{1000} alone is 1002)",
      pattern,
    );
  }
  const shown = `/${pattern}/`;
  const programSize = re.programSize();
  return { test: (text) => re.test(text), toString: () => shown, programSize };
}

/**
 * ajv's `code.regExp` engine: every `pattern`, `patternProperties` and `propertyNames` pattern
 * of a schema runs through {@link linearPattern}.
 */
export const linearRegExpEngine = Object.assign(
  (pattern: string, _flags: string): LinearPattern => linearPattern(pattern),
  { code: "linearPattern" },
);
