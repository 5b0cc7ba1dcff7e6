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
