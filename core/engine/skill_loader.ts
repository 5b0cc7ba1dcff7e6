/**
 * `skills/<id>/SKILL.md`: YAML front matter (name, description, arguments) and a Markdown body
 * that is the prompt template, with `{{argument}}` placeholders. Each becomes an MCP prompt.
 * @module
 */
import type { Definition } from "../mcp/definition_registry.ts";
import { isMapping, parseYamlSource, type ProblemList } from "../config/yaml_source.ts";
import { FieldReader, ID_PATTERN } from "./fields.ts";
import { placeholders } from "./template.ts";

/** One declared prompt argument. */
export interface SkillArgument {
  name: string;
  description?: string;
  required: boolean;
}

/** A validated skill. */
export interface SkillSpec {
  id: string;
  name: string;
  description: string;
  arguments: SkillArgument[];
  template: string;
  source: string;
}

const KEYS = ["name", "description", "arguments"] as const;
const ARGUMENT_KEYS = ["name", "description", "required"] as const;

/**
 * Validates one SKILL.md; `id` is its folder's name. Problems carry the file's own line numbers
 * (the front matter is parsed in place, so line N of the YAML is line N of the file).
 */
export function readSkill(
  id: string,
  text: string,
  path: string,
  problems: ProblemList,
): SkillSpec | undefined {
  const before = problems.size;
  if (!ID_PATTERN.test(id)) {
    problems.addAt(
      path,
      1,
      `the skill folder name "${id}" must match ${ID_PATTERN.source}; rename the folder`,
    );
  }
  const match = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?/.exec(text);
  if (!match) {
    problems.addAt(
      path,
      1,
      'must start with YAML front matter between "---" lines (name, description, arguments), then the prompt',
    );
    return undefined;
  }
  // A blank first line stands in for the opening "---" so YAML line numbers are file line numbers.
  const source = parseYamlSource(`\n${match[1]}`, path, problems);
  if (!source) return undefined;
  const root = source.root;
  if (!isMapping(root)) {
    problems.addAt(path, 2, "the front matter must be a mapping with name and description");
    return undefined;
  }
  const f = new FieldReader(source, problems);
  f.keys(root, [], KEYS);
  const name = f.string(root, [], "name", "a human name");
  const description = f.string(root, [], "description", "one line saying what the skill does");
  const args: SkillArgument[] = [];
  const rawArgs = root.arguments ?? [];
  if (!Array.isArray(rawArgs)) {
    problems.add(source, ["arguments"], "must be a list of { name, description, required }");
  } else {
    rawArgs.forEach((raw, i) => {
      if (!isMapping(raw)) {
        problems.add(source, ["arguments", i], "must be a mapping with a name");
        return;
      }
      f.keys(raw, ["arguments", i], ARGUMENT_KEYS);
      const argName = f.string(raw, ["arguments", i], "name", "the placeholder's name");
      const argDescription = f.optionalString(raw, ["arguments", i], "description");
      if (raw.required !== undefined && typeof raw.required !== "boolean") {
        problems.add(source, ["arguments", i, "required"], "must be true or false");
      }
      if (argName === undefined) return;
      if (args.some((a) => a.name === argName)) {
        problems.add(source, ["arguments", i, "name"], `repeats the argument "${argName}"`);
      }
      args.push({
        name: argName,
        ...(argDescription === undefined ? {} : { description: argDescription }),
        required: raw.required !== false,
      });
    });
  }
  const template = text.slice(match[0].length).trim();
  const bodyLine = text.slice(0, match[0].length).split("\n").length;
  if (template === "") {
    problems.addAt(
      path,
      bodyLine,
      "has no prompt after the front matter; write the prompt template there",
    );
  }
  for (const used of new Set(placeholders(template))) {
    if (!args.some((a) => a.name === used)) {
      problems.addAt(
        path,
        lineOfText(text, used, bodyLine),
        `the placeholder {{${used}}} is not a declared argument; add it under arguments or fix the name`,
      );
    }
  }
  if (problems.size > before) return undefined;
  return { id, name: name!, description: description!, arguments: args, template, source: path };
}

/** The line of the first `{{ name }}` placeholder in the file. */
function lineOfText(text: string, name: string, fallback: number): number {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const at = text.search(new RegExp(`\\{\\{\\s*${escaped}\\s*\\}\\}`));
  return at < 0 ? fallback : text.slice(0, at).split("\n").length;
}

/** The registry record of a skill: its prompt is the body. */
export function skillDefinition(skill: SkillSpec): Definition {
  return {
    id: skill.id,
    name: skill.name,
    description: skill.description,
    prompt: {
      template: skill.template,
      arguments: skill.arguments.map((a) => ({
        name: a.name,
        ...(a.description === undefined ? {} : { description: a.description }),
        required: a.required,
      })),
    },
    body: { ...skill },
  };
}
