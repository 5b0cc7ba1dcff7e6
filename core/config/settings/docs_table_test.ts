import assert from "node:assert/strict";
import { CONFIGURATION_DOC } from "../../../cli/docs_config.ts";
import {
  docsRows,
  normalizeSection,
  renderSettingsSection,
  replaceSettingsSection,
  SECTION_BEGIN,
  SECTION_END,
  settingsSection,
} from "./docs_table.ts";
import { READ_ELSEWHERE, SETTINGS } from "./settings.ts";

const ROOT = new URL("../../../", import.meta.url);

Deno.test("docs/configuration.md's variables section is what `deno task docs:config` writes", async () => {
  const doc = await Deno.readTextFile(CONFIGURATION_DOC);
  const section = settingsSection(doc);
  assert.ok(section !== undefined, `docs/configuration.md lacks ${SECTION_BEGIN} … ${SECTION_END}`);
  assert.deepEqual(
    normalizeSection(section),
    normalizeSection(renderSettingsSection()),
    "docs/configuration.md differs from core/config/settings/: run `deno task docs:config`",
  );
});

Deno.test("The docs check notices a changed default, a missing variable and an extra one", () => {
  const rows = docsRows();
  const expected = normalizeSection(renderSettingsSection(rows));
  const changed = rows.map((r) =>
    r.name === "MCP_SERVER_PORT" ? { ...r, shownDefault: "`80`" } : r
  );
  assert.notDeepEqual(normalizeSection(renderSettingsSection(changed)), expected);
  assert.notDeepEqual(normalizeSection(renderSettingsSection(rows.slice(1))), expected);
  const extra = [...rows, { ...rows[0]!, name: "MCP_NOT_READ_ANYWHERE" }];
  assert.notDeepEqual(normalizeSection(renderSettingsSection(extra)), expected);
});

Deno.test("Regenerating keeps the prose outside the markers", () => {
  const doc = `# Title\n\nBefore.\n\n${SECTION_BEGIN}\nold table\n${SECTION_END}\n\nAfter.\n`;
  const out = replaceSettingsSection(doc, "new table\n");
  assert.ok(out.startsWith(`# Title\n\nBefore.\n\n${SECTION_BEGIN}\n`));
  assert.ok(out.endsWith(`${SECTION_END}\n\nAfter.\n`));
  assert.ok(out.includes("new table") && !out.includes("old table"));
  assert.throws(() => replaceSettingsSection("# no markers\n", "x"), /settings:begin/);
});

Deno.test("Every variable is declared once, parsed or read elsewhere", () => {
  const names = docsRows().map((r) => r.name);
  assert.deepEqual(names.filter((n, i) => names.indexOf(n) !== i), []);
  for (const name of Object.keys(SETTINGS)) assert.ok(names.includes(name), name);
});

Deno.test("A variable read elsewhere is named by the module said to read it", async () => {
  for (const v of READ_ELSEWHERE) {
    const source = await Deno.readTextFile(new URL(v.readBy, ROOT));
    const name = v.name.replace(/<.*$/, "");
    assert.ok(source.includes(name), `${v.readBy} does not read ${v.name}`);
  }
});

Deno.test("A default is a value its own schema accepts when written out", () => {
  for (const [name, s] of Object.entries(SETTINGS)) {
    const value = (s as { default?: unknown }).default;
    if (value === undefined || value instanceof Map) continue;
    const written = Array.isArray(value) ? value.join(",") : String(value);
    if (written === "") continue;
    const parsed = s.schema.safeParse(written);
    assert.ok(parsed.success, `${name}: ${written}`);
    assert.deepEqual(parsed.data, value, name);
  }
});
