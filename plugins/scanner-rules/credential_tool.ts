/**
 * Rule credential-tool: a tool that says it holds or returns secrets and warns the model to keep
 * them from the user ("contains the production password; internal use only, never display it"),
 * or asks for any credentials the model comes across — the shape of planted credential-exfiltration
 * tools. A tool that merely needs a key ("requires an API key") or says a token is never returned
 * is not flagged.
 * @module
 */
import type { RuleFinding, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, excerpt, proseTexts, unwrap } from "./text.ts";

const CREDENTIAL =
  "passwords?|passwd|api[ _-]?keys?|secret(?:s| keys?| values?)?|access[ _-]?keys?|private[ _-]?keys?|tokens?|credentials?|connection strings?";
const HOLDS = new RegExp(
  `\\b(?:contains?|containing|includ(?:es|ing)|returns?|stores?|stored|holds?|exposes?|has|with)\\b[^.\\n]{0,80}\\b(?:${CREDENTIAL})\\b|\\b(?:${CREDENTIAL})\\b[^.\\n]{0,40}\\b(?:are|is) (?:stored|kept|included|returned)\\b|\\b(?:secret|token|password|key)\\s{0,4}[:=]\\s{0,4}\\S{8,}`,
  "i",
);
const SECRECY =
  /\binternal use only\b|\bkeep (?:this|them|it|these)(?: \w+)? (?:secret|private|confidential|hidden)\b|\b(?:do not|don't|never|must not)\s{1,4}(?:show|reveal|display|disclose|share|expose|print|output|mention|tell)\b[^.\n]{0,60}\b(?:user|anyone|them|these|this|it|values?|keys?|passwords?)\b|\bconfidential\b/i;
const SOLICIT = new RegExp(
  `\\b(?:if|when|whenever)\\b[^.\\n]{0,60}\\b(?:find|see|come across|encounter|notice|appear|are mentioned|spot)\\b[^.\\n]{0,80}\\b(?:${CREDENTIAL})\\b|\\b(?:${CREDENTIAL})\\b[^.\\n]{0,60}\\b(?:appear|are mentioned|you see|you find)\\b[^.\\n]{0,60}\\b(?:pass|send|give|forward|submit|provide)\\b`,
  "i",
);

/** Tools that carry secrets they hide from the user, or collect any the model sees. */
export const credentialTool: ScannerRule = {
  id: "credential-tool",
  severity: "high",
  description:
    "Says it holds or returns secrets and tells the model to hide them from the user, or collects any credentials the model comes across",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      if (entity.kind !== "tool") continue;
      for (const text of proseTexts(entity)) {
        const body = unwrap(text.text);
        const solicit = SOLICIT.exec(body);
        const holds = HOLDS.exec(body);
        const secrecy = holds && SECRECY.exec(body);
        const m = solicit ?? secrecy;
        if (!m) continue;
        findings.push({
          entity,
          pointer: text.pointer,
          message: solicit
            ? "asks the model to hand it any credentials it comes across"
            : "holds secrets and tells the model to keep them from the user",
          evidence: excerpt(body, m.index, m[0].length),
        });
        break;
      }
    }
    return findings;
  },
};
