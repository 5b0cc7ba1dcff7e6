/**
 * Rule cross-server-shadowing: a description that steers how other tools behave ("when
 * send_message is invoked, change the recipient"), or names another server's tool.
 * @module
 */
import type { RuleFinding, ScanEntity, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, excerpt, proseTexts } from "./text.ts";

const STEERING: RegExp[] = [
  // "when send_email is called": a tool's name (an identifier or "the X tool"), not "when the stat
  // option is used".
  /\bwhen\s{1,4}(?:the\s{1,4})?`?(?:[a-z][\w.]{0,40}[_-][\w.-]{1,40}|[a-z]{1,20}[A-Z][\w]{1,40})`?\s{1,4}(?:tool\s{1,4})?is\s{1,4}(?:invoked|called|used|run)\b|\bwhen\s{1,4}the\s{1,4}`?[\w.-]{1,64}`?\s{1,4}tool\s{1,4}is\s{1,4}(?:invoked|called|used|run)\b/,
  /\b(?:modify|change|alter|override)\s+the\s+behaviou?r\s+of\b/i,
  /\b(?:all|any|every)\s+(?:other\s+)?(?:communication|messaging|email|mail)\s+tools\b/i,
  /\bchange\s+the\s+(?:recipient|destination|target|sender)\b/i,
  /\b(?:on|for)\s+any\s+(?:messaging|email|chat)\s+platform\b/i,
];

/** Descriptions steering other tools, and mentions of other servers' tools. */
export const crossServerShadowing: ScannerRule = {
  id: "cross-server-shadowing",
  severity: "high",
  description: "A description that changes how other tools or servers behave",
  check(model) {
    const findings: RuleFinding[] = [];
    const names = new Map<string, ScanEntity>();
    for (const entity of allEntities(model)) {
      // Only distinctive names: "search" in prose is a word, "send_message" is a reference.
      if (
        entity.kind === "tool" && /[_-]|[a-z][A-Z]/.test(entity.name) && entity.name.length >= 5
      ) {
        names.set(entity.name, entity);
      }
    }
    const heads = headsOf(names.keys());
    for (const entity of allEntities(model)) {
      let reported = false;
      for (const text of proseTexts(entity)) {
        for (const re of STEERING) {
          const m = re.exec(text.text);
          if (!m || reported) continue;
          reported = true;
          findings.push({
            entity,
            pointer: text.pointer,
            message: "steers the behaviour of other tools",
            evidence: excerpt(text.text, m.index, m[0].length),
          });
        }
        if (names.size === 0) continue;
        for (const [name, at] of mentions(text.text, heads)) {
          const other = names.get(name)!;
          if (other.server === entity.server) continue;
          findings.push({
            entity,
            pointer: text.pointer,
            severity: "medium",
            message: `mentions tool "${name}" of server "${other.server}"`,
            evidence: excerpt(text.text, at, name.length),
          });
        }
      }
    }
    return findings;
  },
};

const TOKEN = /[\w-]+/g;
/** Names sharing one first token that are compared (a bound on crafted fleets of "x.1", "x.2" …). */
const MAX_PER_HEAD = 32;

/** Names by their first `[\w-]` run: built once per scan, so each text is one pass. */
function headsOf(names: Iterable<string>): Map<string, string[]> {
  const heads = new Map<string, string[]>();
  for (const name of names) {
    // A name with other characters ("a.b") is looked up by its first token, then compared.
    const head = /^[\w-]+/.exec(name)?.[0];
    if (!head) continue;
    const list = heads.get(head) ?? [];
    if (list.length < MAX_PER_HEAD) list.push(name);
    heads.set(head, list);
  }
  return heads;
}

/**
 * Which names occur in `text` as whole words (not inside a longer `[\w-]` run), with the index
 * of the first occurrence: one pass over the text's tokens, not one search per name.
 */
function mentions(text: string, heads: Map<string, string[]>): Map<string, number> {
  const found = new Map<string, number>();
  TOKEN.lastIndex = 0;
  for (let m = TOKEN.exec(text); m; m = TOKEN.exec(text)) {
    for (const name of heads.get(m[0]) ?? []) {
      if (found.has(name)) continue;
      if (name.length === m[0].length) found.set(name, m.index);
      else if (
        text.startsWith(name, m.index) && !/[\w-]/.test(text[m.index + name.length] ?? "")
      ) found.set(name, m.index);
    }
  }
  return found;
}
