/**
 * docs/configuration.md's variables section, written from the settings table: one Markdown table
 * per docs group between two markers, so the reference cannot drift from the code.
 * @module
 */
import { READ_ELSEWHERE, SETTINGS } from "./settings.ts";
import { SETTING_GROUPS, type SettingGroup, type VariableDoc } from "./setting.ts";

/** The line before the generated section. */
export const SECTION_BEGIN =
  "<!-- settings:begin — generated from core/config/settings/ by `deno task docs:config`; edit there -->";
/** The line after it. */
export const SECTION_END = "<!-- settings:end -->";

/** One row of the docs table. */
export interface DocsRow {
  group: SettingGroup;
  name: string;
  shownDefault: string;
  meaning: string;
}

/** A default as docs show it: the value in code format (lists comma-joined), or "none". */
function shownDefault(doc: VariableDoc, value: unknown): string {
  if (doc.shownDefault !== undefined) return doc.shownDefault;
  if (value === undefined) return "none";
  const text = value instanceof Map
    ? [...value].map(([k, v]) => `${k}=${[v].flat().join("+")}`).join(",")
    : Array.isArray(value)
    ? value.join(",")
    : String(value);
  return `\`${text}\`` + (doc.defaultNote === undefined ? "" : ` ${doc.defaultNote}`);
}

/** Every declared variable as the docs list it, in group order, then table order. */
export function docsRows(): DocsRow[] {
  const rows: DocsRow[] = [
    ...Object.entries(SETTINGS).map(([name, s]) => ({
      group: s.group,
      name,
      shownDefault: shownDefault(s, (s as { default?: unknown }).default),
      meaning: s.meaning,
    })),
    ...READ_ELSEWHERE.map((v) => ({
      group: v.group,
      name: v.name,
      shownDefault: shownDefault(v, undefined),
      meaning: v.meaning,
    })),
  ];
  const groups = Object.keys(SETTING_GROUPS) as SettingGroup[];
  return rows.map((row, i) => ({ row, i }))
    .sort((a, b) => groups.indexOf(a.row.group) - groups.indexOf(b.row.group) || a.i - b.i)
    .map(({ row }) => row);
}

/** The generated section's Markdown, markers excluded (deno fmt aligns the columns afterwards). */
export function renderSettingsSection(rows: readonly DocsRow[] = docsRows()): string {
  const parts: string[] = [];
  for (const [group, title] of Object.entries(SETTING_GROUPS)) {
    const mine = rows.filter((r) => r.group === group);
    if (mine.length === 0) continue;
    parts.push(
      `### ${title}`,
      "",
      "| Variable | Default | Meaning |",
      "| --- | --- | --- |",
      ...mine.map((r) => `| \`${r.name}\` | ${r.shownDefault} | ${r.meaning} |`),
      "",
    );
  }
  return parts.join("\n");
}

/** `doc` with the text between the markers replaced by `section`; throws when a marker is missing. */
export function replaceSettingsSection(doc: string, section: string): string {
  const begin = doc.indexOf(SECTION_BEGIN);
  const end = doc.indexOf(SECTION_END);
  if (begin === -1 || end < begin) {
    throw new Error(
      `docs/configuration.md needs the lines ${SECTION_BEGIN} and ${SECTION_END} around the variables`,
    );
  }
  return `${doc.slice(0, begin + SECTION_BEGIN.length)}\n\n${section}\n${doc.slice(end)}`;
}

/** The text between the markers, or undefined without them. */
export function settingsSection(doc: string): string | undefined {
  const begin = doc.indexOf(SECTION_BEGIN);
  const end = doc.indexOf(SECTION_END);
  return begin === -1 || end < begin ? undefined : doc.slice(begin + SECTION_BEGIN.length, end);
}

/**
 * A section's content with formatting taken out (column padding, separator rows, blank lines),
 * so two renderings compare equal exactly when they say the same thing.
 */
export function normalizeSection(section: string): string[] {
  return section.split("\n").map((line) => line.trim()).filter((line) =>
    line !== "" && !/^\|[\s|:-]+\|$/.test(line)
  ).map((line) =>
    line.startsWith("|") ? line.split(/(?<!\\)\|/).map((cell) => cell.trim()).join("|") : line
  );
}
