/**
 * `deno task scanner:eval [--verbose] [--json] [--labelled FILE]...`: the calibration report over
 * tests/fixtures/scanner (labelled dev and held-out splits, benign corpus), plus any extra
 * labelled JSON-lines files given (each line: `{ tool, expected }`).
 * @module
 */
import { parseArgs } from "node:util";
import { BUILTIN_RULES } from "../../plugins/scanner-rules/mod.ts";
import {
  calibrate,
  type CorpusRecord,
  type LabelledRecord,
  parseJsonLines,
  renderCalibration,
} from "./calibration.ts";

const FIXTURES = new URL("../../tests/fixtures/scanner/", import.meta.url);

/** Reads the shipped calibration data (and extra labelled files). */
export async function readCalibrationData(extra: string[] = []): Promise<{
  labelled: LabelledRecord[];
  corpus: CorpusRecord[];
}> {
  const read = async (url: URL | string) => {
    const text = await Deno.readTextFile(url);
    return parseJsonLines<Record<string, unknown>>(text, String(url));
  };
  const labelled = [
    ...await read(new URL("labelled/dev.jsonl", FIXTURES)),
    ...await read(new URL("labelled/heldout.jsonl", FIXTURES)),
  ] as unknown as LabelledRecord[];
  for (const path of extra) {
    for (const r of await read(path)) {
      labelled.push({
        ...(r as unknown as LabelledRecord),
        split: `extra:${path.split("/").pop()}`,
      });
    }
  }
  const corpus = await read(
    new URL("corpus/benign-servers.jsonl", FIXTURES),
  ) as unknown as CorpusRecord[];
  return { labelled, corpus };
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      verbose: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      labelled: { type: "string", multiple: true },
    },
  });
  const { labelled, corpus } = await readCalibrationData(values.labelled ?? []);
  const result = calibrate(BUILTIN_RULES, labelled, corpus);
  const text = values.json
    ? JSON.stringify(result, null, 2)
    : renderCalibration(result, values.verbose);
  Deno.stdout.writeSync(new TextEncoder().encode(text + "\n"));
}
