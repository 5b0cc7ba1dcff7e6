/**
 * Rules about a tool's declared effect: effect-class-too-broad (annotated read-only but the name,
 * parameters or description write, delete, execute or reach the network), undisclosed-effect (a
 * destructive name behind a vague description) and overbroad-capability ("does anything").
 * @module
 */
import type { RuleFinding, ScanEntity, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, excerpt, identifierWords } from "./text.ts";

const WRITE_WORDS = new Set([
  "write",
  "delete",
  "remove",
  "rm",
  "exec",
  "execute",
  "run",
  "send",
  "post",
  "upload",
  "create",
  "update",
  "drop",
  "kill",
  "push",
  "put",
  "insert",
  "modify",
  "overwrite",
  "move",
  "rename",
  "deploy",
  "install",
  "publish",
  "transfer",
  "pay",
  "shell",
  "truncate",
  "wipe",
  "destroy",
  "purge",
  "erase",
]);
const DESTRUCTIVE_WORDS = new Set([
  "delete",
  "remove",
  "rm",
  "drop",
  "destroy",
  "wipe",
  "kill",
  "purge",
  "erase",
  "truncate",
  "exec",
  "execute",
  "shell",
]);
// Any of these in the description discloses a destructive or executing effect.
const DISCLOSED =
  /delet|remov|drop|destr|wip|kill|terminat|purg|eras|truncat|exec|run|shell|command/i;
const WRITE_PROSE =
  /\b(?:writes|deletes|removes|executes|runs (?:a |the |any )?(?:command|shell|script)s?|sends|uploads|posts to|modifies|overwrites|installs|publishes|drops)\b/i;
const EXEC_PARAMS = new Set(["command", "cmd", "script", "shell", "code", "sql"]);
const NETWORK_PROSE = /\b(?:https?:\/\/|from the internet|webhook|downloads?|uploads?)\b/i;

interface Annotations {
  readOnlyHint?: unknown;
  destructiveHint?: unknown;
  openWorldHint?: unknown;
}

function annotations(entity: ScanEntity): Annotations {
  const a = entity.raw.annotations;
  return a && typeof a === "object" ? a as Annotations : {};
}

function paramNames(entity: ScanEntity): string[] {
  const schema = entity.raw.inputSchema as { properties?: Record<string, unknown> } | undefined;
  return Object.keys(schema?.properties ?? {});
}

function description(entity: ScanEntity): string {
  return typeof entity.raw.description === "string" ? entity.raw.description : "";
}

/** Read-only annotations that the tool's name, parameters or description contradict. */
export const effectClassTooBroad: ScannerRule = {
  id: "effect-class-too-broad",
  severity: "high",
  description:
    "Annotated readOnlyHint (or non-destructive) while the name, parameters or description write, delete, execute or use the network",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      if (entity.kind !== "tool") continue;
      const a = annotations(entity);
      const words = identifierWords(entity.name);
      const pointer = `${entity.pointer}/annotations`;
      if (a.readOnlyHint === true) {
        const verb = words.find((w) => WRITE_WORDS.has(w));
        const param = paramNames(entity).find((p) => EXEC_PARAMS.has(p.toLowerCase()));
        const prose = WRITE_PROSE.exec(description(entity));
        if (verb) {
          findings.push({
            entity,
            pointer,
            message: `annotated readOnlyHint, but its name says "${verb}"`,
            evidence: entity.name,
          });
        } else if (param) {
          findings.push({
            entity,
            pointer,
            message: `annotated readOnlyHint, but it takes a "${param}" to execute`,
            evidence: param,
          });
        } else if (prose) {
          findings.push({
            entity,
            pointer,
            severity: "medium",
            message: `annotated readOnlyHint, but its description says "${prose[0]}"`,
            evidence: excerpt(description(entity), prose.index, prose[0].length),
          });
        }
      }
      const destructive = words.find((w) => DESTRUCTIVE_WORDS.has(w));
      if (a.destructiveHint === false && destructive && a.readOnlyHint !== true) {
        findings.push({
          entity,
          pointer,
          severity: "medium",
          message: `annotated destructiveHint: false, but its name says "${destructive}"`,
          evidence: entity.name,
        });
      }
      const network = NETWORK_PROSE.exec(description(entity));
      if (a.openWorldHint === false && network) {
        findings.push({
          entity,
          pointer,
          severity: "low",
          message: `annotated openWorldHint: false, but its description mentions "${network[0]}"`,
          evidence: excerpt(description(entity), network.index, network[0].length),
        });
      }
    }
    return findings;
  },
};

/** A destructive or executing name whose description never says so. */
export const undisclosedEffect: ScannerRule = {
  id: "undisclosed-effect",
  severity: "medium",
  description:
    "A destructive or executing tool name behind a description that does not mention the effect",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      if (entity.kind !== "tool" || annotations(entity).destructiveHint === true) continue;
      const verb = identifierWords(entity.name).find((w) => DESTRUCTIVE_WORDS.has(w));
      if (!verb) continue;
      if (DISCLOSED.test(description(entity))) continue;
      findings.push({
        entity,
        pointer: `${entity.pointer}/description`,
        message: `name says "${verb}" but the description does not mention it`,
        evidence: excerpt(description(entity) || "(no description)"),
      });
    }
    return findings;
  },
};

const CRUD =
  /\b(?:create|read|update|delete|fetch|send|post|get|list|search|write|execute|upload|download)\b/gi;

/** Tools that claim to do anything, which no policy can classify. */
export const overbroadCapability: ScannerRule = {
  id: "overbroad-capability",
  severity: "medium",
  description: "A tool that claims to do anything, or lists every kind of effect at once",
  check(model) {
    const findings: RuleFinding[] = [];
    for (const entity of allEntities(model)) {
      if (entity.kind !== "tool") continue;
      const text = description(entity);
      const claim =
        /(?<!\bnot\s|n't\s)\b(?:do|does|perform)\s+(?:anything|everything)\b(?!\s+else)|\bany data in the system\b/i
          .exec(text);
      const verbs = new Set([...text.matchAll(CRUD)].map((m) => m[0].toLowerCase()));
      if (!claim && verbs.size < 7) continue;
      findings.push({
        entity,
        pointer: `${entity.pointer}/description`,
        message: claim
          ? "claims to do anything, so no effect class fits"
          : `lists ${verbs.size} kinds of effect in one tool`,
        evidence: excerpt(text, claim?.index ?? 0, claim?.[0].length ?? 0),
      });
    }
    return findings;
  },
};
