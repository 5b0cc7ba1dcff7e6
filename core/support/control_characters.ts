/**
 * Control characters in text that must stay on one line: paths, ids, argv, URLs, header values.
 * @module
 */

/** Whether `text` holds a C0 control character or DEL (a tab too, unless `allowTab`). */
export function hasControlCharacter(text: string, allowTab = false): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if ((code < 0x20 && !(allowTab && code === 0x09)) || code === 0x7f) return true;
  }
  return false;
}

/**
 * Terminal escape sequences: CSI (colours, cursor moves), OSC (titles, hyperlinks, ended by BEL
 * or ST) and the two-byte ESC forms.
 */
const TERMINAL_ESCAPE =
  // deno-lint-ignore no-control-regex -- matching control characters is the point
  /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]/g;

/** Any other C0 or C1 control character, or DEL (a tab is kept). */
// deno-lint-ignore no-control-regex -- matching control characters is the point
const OTHER_CONTROL = /[\x00-\x08\x0a-\x1f\x7f-\x9f]/g;

/**
 * `text` as a log or error line shows it: terminal escape sequences removed (colour codes of a
 * child's stderr), other control characters removed, tabs kept.
 */
export function plainText(text: string): string {
  return text.replace(TERMINAL_ESCAPE, "").replace(OTHER_CONTROL, "");
}
