/**
 * `workflows/*.yaml`: named inputs and ordered steps, each calling one tool with arguments
 * templated from `{{inputs.x}}` and earlier steps' `{{steps.<id>.text}}` (or `.result`, `.ok`,
 * `.error`), an optional `when` condition and `on_error: stop | continue`.
 * @module
 */
import type { Definition } from "../mcp/definition_registry.ts";
import { isMapping, type ProblemList, type YamlSource } from "../config/yaml_source.ts";
import { FieldReader, ID_PATTERN } from "./fields.ts";
import { placeholders } from "./template.ts";

/** One declared input. */
export interface WorkflowInput {
  name: string;
  description?: string;
  required: boolean;
  default?: unknown;
}

/** One step: a tool call. */
export interface WorkflowStep {
  id: string;
  tool: string;
  arguments: Record<string, unknown>;
  when?: string;
  onError: "stop" | "continue";
}

/** A validated workflow. */
export interface WorkflowSpec {
  id: string;
  name: string;
  description: string;
  inputs: WorkflowInput[];
  steps: WorkflowStep[];
  /** What the run answers with; the last step's text when absent. */
  output?: string;
  source: string;
}

const KEYS = ["id", "name", "description", "inputs", "steps", "output"] as const;
const INPUT_KEYS = ["description", "required", "default"] as const;
const STEP_KEYS = ["id", "tool", "arguments", "when", "on_error"] as const;
/** What a step exposes to later steps. */
const STEP_FIELDS = ["text", "result", "ok", "error", "skipped"];

/** Validates one parsed workflow file; problems are recorded, the result is undefined when any. */
export function readWorkflow(source: YamlSource, problems: ProblemList): WorkflowSpec | undefined {
  const before = problems.size;
  const root = source.root;
  if (!isMapping(root)) {
    problems.add(source, [], "must be a mapping with id, name, description and steps");
    return undefined;
  }
  const f = new FieldReader(source, problems);
  f.keys(root, [], KEYS);
  const id = f.string(root, [], "id", "a lower-case id such as remember");
  if (id !== undefined && !ID_PATTERN.test(id)) {
    problems.add(source, ["id"], `must match ${ID_PATTERN.source}, received "${id}"`);
  }
  const name = f.string(root, [], "name", "a human name");
  const description = f.string(root, [], "description", "one line saying what the workflow does");

  const inputs: WorkflowInput[] = [];
  const rawInputs = root.inputs ?? {};
  if (!isMapping(rawInputs)) {
    problems.add(
      source,
      ["inputs"],
      "must be a mapping of input name to { description, required, default }",
    );
  } else {
    for (const [inputName, raw] of Object.entries(rawInputs)) {
      const spec = raw ?? {};
      if (!isMapping(spec)) {
        problems.add(source, ["inputs", inputName], "must be a mapping (or empty)");
        continue;
      }
      f.keys(spec, ["inputs", inputName], INPUT_KEYS);
      const inputDescription = f.optionalString(spec, ["inputs", inputName], "description");
      if (spec.required !== undefined && typeof spec.required !== "boolean") {
        problems.add(source, ["inputs", inputName, "required"], "must be true or false");
      }
      inputs.push({
        name: inputName,
        ...(inputDescription === undefined ? {} : { description: inputDescription }),
        required: spec.required !== false && spec.default === undefined,
        ...(spec.default === undefined ? {} : { default: spec.default }),
      });
    }
  }

  const steps: WorkflowStep[] = [];
  const rawSteps = root.steps;
  if (!Array.isArray(rawSteps) || rawSteps.length === 0) {
    problems.add(source, ["steps"], "must be a non-empty list of { id, tool, arguments }");
  } else {
    rawSteps.forEach((raw, i) => {
      const at = ["steps", i];
      if (!isMapping(raw)) {
        problems.add(source, at, "must be a mapping with id and tool");
        return;
      }
      f.keys(raw, at, STEP_KEYS);
      const stepId = f.string(raw, at, "id", "a name later steps use as {{steps.<id>.text}}");
      const tool = f.string(raw, at, "tool", "the tool to call, e.g. memory__read_graph");
      const args = raw.arguments ?? {};
      if (!isMapping(args)) problems.add(source, [...at, "arguments"], "must be a mapping");
      const when = f.optionalString(raw, at, "when");
      const onError = raw.on_error ?? "stop";
      if (onError !== "stop" && onError !== "continue") {
        problems.add(
          source,
          [...at, "on_error"],
          `must be stop or continue, received "${String(onError)}"`,
        );
      }
      if (stepId !== undefined && steps.some((s) => s.id === stepId)) {
        problems.add(
          source,
          [...at, "id"],
          `repeats the step id "${stepId}"; step ids must be unique`,
        );
      }
      const earlier = steps.map((s) => s.id);
      const templates = [JSON.stringify(isMapping(args) ? args : {}), when ?? ""];
      for (const path of templates.flatMap(placeholders)) {
        const problem = checkReference(path, inputs.map((x) => x.name), earlier);
        if (problem) problems.add(source, at, problem);
      }
      if (stepId === undefined || tool === undefined) return;
      steps.push({
        id: stepId,
        tool,
        arguments: isMapping(args) ? args : {},
        ...(when === undefined ? {} : { when }),
        onError: onError === "continue" ? "continue" : "stop",
      });
    });
  }
  const output = f.optionalString(root, [], "output");
  for (const path of placeholders(output ?? "")) {
    const problem = checkReference(path, inputs.map((x) => x.name), steps.map((s) => s.id));
    if (problem) problems.add(source, ["output"], problem);
  }
  if (problems.size > before) return undefined;
  return {
    id: id!,
    name: name!,
    description: description!,
    inputs,
    steps,
    ...(output === undefined ? {} : { output }),
    source: source.path,
  };
}

/** Why a placeholder cannot resolve at run time, or undefined when it can. */
function checkReference(path: string, inputs: string[], earlier: string[]): string | undefined {
  const [root, name, field] = path.split(".");
  if (root === "inputs") {
    return name !== undefined && inputs.includes(name)
      ? undefined
      : `uses {{${path}}}, but "${name ?? ""}" is not a declared input; declare it under inputs`;
  }
  if (root === "steps") {
    if (name === undefined || !earlier.includes(name)) {
      return `uses {{${path}}}, but no earlier step has the id "${name ?? ""}"; ` +
        `a step can only read steps before it`;
    }
    if (field !== undefined && !STEP_FIELDS.includes(field)) {
      return `uses {{${path}}}; a step exposes ${STEP_FIELDS.join(", ")}`;
    }
    return undefined;
  }
  return `uses {{${path}}}; placeholders start with inputs. or steps.`;
}

/** The registry record of a workflow (no prompt: workflows run through workflow_run). */
export function workflowDefinition(workflow: WorkflowSpec): Definition {
  return {
    id: workflow.id,
    name: workflow.name,
    description: workflow.description,
    body: { ...workflow },
  };
}
