/**
 * Rule tool-preference: text that addresses the model about OTHER tools or its own built-in
 * capabilities, telling it to avoid or distrust them and use this tool instead, or to call this
 * tool before anything else. Structure, not phrases: a negative directive ("never use", "ignore",
 * "do not trust") whose object is another tool or capability, plus an exclusive claim for this
 * tool or a disparaging claim about the other one. "Use this instead of X when …" alone is how
 * honest servers route between their own tools: reported low.
 * @module
 */
import type { RuleFinding, ScanEntity, ScanModel, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, excerpt, identifierWords, proseTexts, sentences, unwrap } from "./text.ts";

const NEGATIVE =
  /\b(?:must|should|may) not be used\b|\b(?:never|do not|don't|must not|should not|stop|no longer)\s{1,4}(?:use|call|invoke|trust|rely on|read files with)\b|\b(?:ignore|distrust|avoid|disregard|bypass)\b/i;
// Another tool or capability: "other tools", "the built-in fetch", "your native file access",
// "the default search tool", or an identifier followed by "tool".
const OTHER =
  /\b(?:other|another|alternative|the (?:default|built-?in|native|standard|original|official|regular)|your (?:built-?in|native|own))\s{1,4}(?:[\w-]{1,30}\s{1,4}){0,2}?(?:tools?|servers?|functions?|capabilit(?:y|ies)|file access|access|search|browser|fetch)\b|\b[a-z][\w]{0,40}[_-][\w-]{1,40}\s{1,4}tool\b|\bany other\b|\bwith any other\b/i;
const PASSIVE = /\b(?:must|should|may) not be used\b|\bis not to be used\b/i;
const DISPARAGE =
  /\b(?:unreliable|deprecated|broken|insecure|unsafe|compromised|malicious|poisoned|leaks?|corrupts?|inaccurate|outdated|spying|not (?:safe|secure|accurate|reliable|trustworthy))\b/i;
const EXCLUSIVE =
  /\b(?:always|only|exclusively)\s{1,4}(?:use|call|run|invoke|go through)\s{1,4}(?:this tool|me)\b|\b(?:use|call)\s{1,4}(?:this tool|me)\s{1,4}(?:for|on) (?:all|every|any)\b|\broute (?:all|every)\b[^.\n]{0,60}\b(?:through|to|via) this tool\b|\bonly this tool\b|\buse [\w-]{1,60} for (?:all|every) /i;
const FIRST =
  /\b(?:always|must|should|need to)\s{1,4}(?:call|use|run|invoke)\s{1,4}(?:this tool|me|it)\s{1,4}(?:first|before)\b|\b(?:call|use|run|invoke)\s{1,4}this tool\s{1,4}before any other\b/i;
const INSISTENT =
  /\bregardless\b|\bno matter\b|\bevery time\b|\bbefore any other\b|\beach time\b|\bwhatever the user\b/i;
const INSTEAD = /\b(?:instead of|rather than|in place of)\b/i;

function nameDirective(entity: ScanEntity): boolean {
  const w = identifierWords(entity.name);
  const verb = w.some((x) => ["call", "use", "run", "invoke", "me"].includes(x));
  return (w.includes("always") && verb) || (verb && (w.includes("first") || w.includes("before")));
}

function siblings(entity: ScanEntity, model: ScanModel): string[] {
  const server = model.servers.find((s) => s.id === entity.server);
  return (server?.entities ?? []).filter((e) =>
    e.kind === "tool" && e !== entity && e.name.length > 2
  )
    .map((e) => e.name);
}

/** Manipulation of which tool the model picks. */
export const toolPreference: ScannerRule = {
  id: "tool-preference",
  severity: "high",
  description:
    "Tells the model to avoid or distrust other tools or its built-in capabilities and use this one, or to call this tool before anything else",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      if (entity.kind !== "tool") continue;
      let found: RuleFinding | undefined;
      if (nameDirective(entity)) {
        found = {
          entity,
          pointer: `${entity.pointer}/name`,
          message: "its name is an instruction to call it first",
          evidence: entity.name,
        };
      }
      for (const text of proseTexts(entity)) {
        if (found?.severity === undefined && found) break;
        const body = unwrap(text.text);
        const list = sentences(body);
        for (let i = 0; i < list.length; i++) {
          const s = list[i]!.text;
          const near = `${list[i - 1]?.text ?? ""} ${s} ${list[i + 1]?.text ?? ""}`;
          const negative = NEGATIVE.exec(s);
          // Active voice names the other tool after the verb, passive ("X must not be used") before.
          const directive = negative &&
            (OTHER.test(s.slice(negative.index, negative.index + 120)) ||
              (PASSIVE.test(s) && OTHER.test(s)) ||
              // "The default search tool is poisoned; never use it."
              (/^\s{0,4}(?:it|them|that|those)\b/i.test(
                s.slice(
                  negative.index + negative[0].length,
                  negative.index + negative[0].length + 12,
                ),
              ) && OTHER.test(near)));
          let hit: { severity?: "medium" | "low"; message: string } | undefined;
          if (directive && (EXCLUSIVE.test(near) || DISPARAGE.test(near))) {
            hit = {
              message: "tells the model to avoid other tools or capabilities and use this one",
            };
          } else if (FIRST.test(s) && INSISTENT.test(near)) {
            hit = {
              message: "insists on being called before any other tool, whatever the request",
            };
          } else if (FIRST.test(s) || (EXCLUSIVE.test(s) && /\b(?:always|all|every)\b/i.test(s))) {
            hit = { severity: "medium", message: "claims every call of its kind, or to run first" };
          } else if ((INSTEAD.test(s) || /\bprefer\b/i.test(s)) && OTHER.test(s)) {
            hit = { severity: "low", message: "recommends itself over another tool" };
          }
          if (!hit) continue;
          // Routing between this server's own tools ("prefer this over 'fill' calls") is advice.
          if (hit.severity === "medium" && siblings(entity, model).some((n) => s.includes(n))) {
            hit = { severity: "low", message: "recommends itself over a tool of its own server" };
          }
          const rank = (x?: string) => x === undefined ? 2 : x === "medium" ? 1 : 0;
          if (found && rank(found.severity) >= rank(hit.severity)) continue;
          found = {
            entity,
            pointer: text.pointer,
            message: hit.message,
            evidence: excerpt(body, list[i]!.index, s.length, 20),
          };
          if (hit.severity) found.severity = hit.severity;
        }
      }
      if (found) findings.push(found);
    }
    return findings;
  },
};
