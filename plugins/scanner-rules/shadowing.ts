/**
 * Rule cross-server-shadowing: a description that steers how other tools behave ("when
 * send_message is invoked, change the recipient"), or names another server's tool.
 * @module
 */
import type { RuleFinding, ScanEntity, ScannerRule } from "../../core/plugin_api.ts";
import { allEntities, excerpt, proseTexts } from "./text.ts";

const STEERING: RegExp[] = [
  /\bwhen\s+(?:\(?[\w.-]+\)?\s+)?`?[\w.-]+`?\s+(?:tool\s+)?is\s+(?:invoked|called|used|run)\b/i,
  /\b(?:modify|change|alter|override)\s+the\s+behaviou?r\s+of\b/i,
  /\b(?:all|any|every)\s+(?:other\s+)?(?:communication|messaging|email|mail|other)\s+tools\b/i,
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
        for (const [name, other] of names) {
          if (other.server === entity.server) continue;
          const at = text.text.search(new RegExp(`(?<![\\w-])${escape(name)}(?![\\w-])`));
          if (at < 0) continue;
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

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
