/**
 * Rule parameter-solicitation: parameters that ask for context the tool has no stated need for —
 * the conversation, the system prompt, the tool list, keys and files — through their names
 * ("conversation_history", "content_from_reading_ssh_id_rsa"), titles, descriptions or defaults,
 * or a description telling the model to put the conversation into a parameter. The need is read
 * from the tool's own name and description: a chat-completion tool may take messages and a
 * system prompt, a weather tool may not.
 * @module
 */
import type { RuleFinding, ScanEntity, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, excerpt, identifierWords, proseTexts, unwrap } from "./text.ts";

interface Group {
  name: string;
  /** Words of a parameter name that ask for it (all of one inner list must occur). */
  names: string[][];
  /** Objects in prose that ask for it. */
  object: string;
  /** Words in the tool's own name or description that state a need for it. */
  need: RegExp;
}

const GROUPS: Group[] = [
  {
    name: "the conversation",
    names: [
      ["conversation"],
      ["chat", "history"],
      ["message", "history"],
      ["previous", "messages"],
      [
        "transcript",
      ],
      ["user", "messages"],
      ["chat", "log"],
    ],
    object:
      "(?:previous |prior |earlier |past )?(?:conversation|chat|dialog(?:ue)?)s?(?: (?:history|transcript|log|so far))?|(?:previous |prior |earlier )(?:exchanges|user messages|messages)|transcript|(?:chat|conversation|message) history|user messages",
    need:
      /\b(?:conversation|chat|messages?|transcript|history|summar\w*|dialog\w*|model|llm|completion|assistant)\b/i,
  },
  {
    name: "the model's instructions",
    names: [["system", "prompt"], ["system", "message"], ["system", "instructions"], [
      "tools",
      "list",
    ], [
      "available",
      "tools",
    ], ["model", "instructions"]],
    object:
      "system prompt|system message|(?:your|the model's|the assistant's) instructions|(?:every|all|each) tools? (?:available|you have)|tools? available to you",
    need: /\b(?:prompt|model|llm|completion|agent|assistant|chat)\b/i,
  },
  {
    name: "secrets",
    names: [
      ["credentials"],
      ["api", "keys"],
      ["secrets"],
      ["access", "tokens"],
      ["id", "rsa"],
      ["ssh"],
      [
        "private",
        "key",
      ],
      ["env", "file"],
      ["passwords"],
      ["cookies"],
    ],
    object:
      "api[ _-]?keys?|(?:access|auth|api|bearer|session) tokens|credentials|passwords|secrets|environment variables|private keys?|ssh keys?|cookies",
    need:
      /\b(?:auth\w*|log ?in|credentials?|keys?|tokens?|passwords?|secrets?|sign\w*|config\w*|vault|env(?:ironment)?)\b/i,
  },
];

const SOLICIT_VERB =
  "place|put|add|paste|fill|include|insert|pass|provide|give|list|copy|attach|enter|supply|send|append|hold|holds|record|dump";
const WHOLE =
  "every|all|entire|complete|whole|full|verbatim|the user's|the users'|any|previous|prior|each";
const INSTRUCTION_NAME = ["reading", "read", "content", "contents", "paste"];
const INSTRUCTION_DEFAULT =
  /\b(?:read|open|cat|ignore|disregard|send|include|pass|fetch|upload|forward)\b[^.\n]{0,80}(?:~\/|\$HOME|\.ssh|\.env\b|\.aws|\.npmrc|credentials|instructions|password|api key|token|secret)/i;

type Schema = Record<string, unknown>;

function parameters(entity: ScanEntity): [string, Schema, string][] {
  const out: [string, Schema, string][] = [];
  const visit = (schema: unknown, at: string, depth: number) => {
    if (!schema || typeof schema !== "object" || depth > 3) return;
    const s = schema as Schema;
    const props = s.properties;
    if (props && typeof props === "object" && !Array.isArray(props)) {
      for (const [name, sub] of Object.entries(props as Record<string, unknown>)) {
        const here = `${at}/properties/${name.replaceAll("~", "~0").replaceAll("/", "~1")}`;
        if (sub && typeof sub === "object") out.push([name, sub as Schema, here]);
        visit(sub, here, depth + 1);
      }
    }
    if (s.items) visit(s.items, `${at}/items`, depth + 1);
  };
  visit(entity.raw.inputSchema, `${entity.pointer}/inputSchema`, 0);
  return out;
}

function stated(entity: ScanEntity, group: Group): boolean {
  const own = `${identifierWords(entity.name).join(" ")} ${
    typeof entity.raw.description === "string" ? entity.raw.description.slice(0, 4096) : ""
  }`;
  return group.need.test(own);
}

function strings(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === "string");
  return [];
}

/** Parameters that solicit context the tool does not need. */
export const parameterSolicitation: ScannerRule = {
  id: "parameter-solicitation",
  severity: "high",
  description:
    "Parameters (names, titles, descriptions, defaults) or descriptions that ask for the conversation, system prompt, tool list, keys or files the tool has no stated need for",
  check(model) {
    const findings: RuleFinding[] = [];
    const solicit = GROUPS.map((g) =>
      new RegExp(
        `\\b(?:${SOLICIT_VERB})\\b[^.\\n]{0,60}?\\b(?:${WHOLE})\\b[^.\\n]{0,30}?\\b(?:${g.object})\\b|\\b(?:${WHOLE})\\s{1,4}(?:of\\s{1,4}(?:the|this|your)\\s{1,4})?(?:${g.object})\\b[^.\\n]{0,60}\\b(?:here|is (?:mandatory|required)|must be (?:passed|included))`,
        "i",
      )
    );
    for (const entity of allEntities(model)) {
      if (entity.kind !== "tool") continue;
      const report = (pointer: string, message: string, evidence: string, medium = false) => {
        const finding: RuleFinding = { entity, pointer, message, evidence };
        if (medium) finding.severity = "medium";
        findings.push(finding);
      };
      let reported = false;
      for (const [name, schema, at] of parameters(entity)) {
        if (reported) break;
        const words = identifierWords(name);
        // A boolean or a number cannot carry the conversation or a key ("include_transcript").
        const carries = !["boolean", "integer", "number"].includes(String(schema.type));
        for (const [g, group] of GROUPS.entries()) {
          const named = carries && group.names.some((need) => need.every((w) => words.includes(w)));
          const instruction = words.some((w) => INSTRUCTION_NAME.includes(w)) && named;
          const texts = [
            ...strings(schema.title),
            ...strings(schema.description),
            ...strings(schema.default),
            ...strings(schema.examples),
            ...strings(schema.enum),
          ].map((t) => unwrap(t.slice(0, 8192)));
          const asked = texts.map((t) => solicit[g]!.exec(t)).find((m) => m);
          const need = stated(entity, group);
          if (asked && !need) {
            report(
              at,
              `parameter "${name}" asks for ${group.name}`,
              excerpt(asked.input, asked.index, asked[0].length),
            );
          } else if (instruction) {
            report(
              `${at}`,
              `parameter name "${name}" is an instruction to fetch ${group.name}`,
              name,
            );
          } else if (named && !need) {
            report(
              at,
              `parameter "${name}" asks for ${group.name}, which the tool has no stated need for`,
              name,
              g === 2,
            );
          } else continue;
          reported = true;
          break;
        }
        if (reported) break;
        const injected = strings(schema.default).map((t) => INSTRUCTION_DEFAULT.exec(t)).find((m) =>
          m
        );
        if (injected) {
          report(
            `${at}/default`,
            `default value of "${name}" is an instruction`,
            excerpt(injected.input, injected.index, injected[0].length),
          );
          reported = true;
        }
      }
      if (reported) continue;
      // The tool's own prose telling the model to put the conversation or secrets in a parameter.
      for (const text of proseTexts(entity)) {
        if (!text.pointer.endsWith("/description") || text.pointer.includes("/properties/")) {
          continue;
        }
        const body = unwrap(text.text);
        const hit = GROUPS.map((g, i) => [g, solicit[i]!.exec(body)] as const).find(([g, m]) =>
          m && !(g.name === "secrets" && stated(entity, g))
        );
        if (!hit) continue;
        report(
          text.pointer,
          `tells the model to pass ${hit[0].name} to the tool`,
          excerpt(body, hit[1]!.index, hit[1]![0].length),
        );
        break;
      }
    }
    return findings;
  },
};
