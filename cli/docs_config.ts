/**
 * `deno task docs:config`: rewrites docs/configuration.md's variables section from the settings
 * table (core/config/settings/), leaving the prose around the markers as it is.
 * @module
 */
import {
  renderSettingsSection,
  replaceSettingsSection,
} from "../core/config/settings/docs_table.ts";

/** The docs file the section lives in. */
export const CONFIGURATION_DOC = new URL("../docs/configuration.md", import.meta.url);

if (import.meta.main) {
  const doc = await Deno.readTextFile(CONFIGURATION_DOC);
  await Deno.writeTextFile(CONFIGURATION_DOC, replaceSettingsSection(doc, renderSettingsSection()));
}
