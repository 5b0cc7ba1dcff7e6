import assert from "node:assert/strict";
import type { ResourceTemplate } from "@modelcontextprotocol/sdk/types.js";
import { instancePattern, quarantinedTemplateOf } from "./template_quarantine.ts";

const template = (uriTemplate: string): ResourceTemplate => ({ name: uriTemplate, uriTemplate });
const quarantined = () => "is quarantined by the scanner";

Deno.test("the instance check is the SDK's own expression for the template", () => {
  // Pins the SDK members read: an SDK that moves them fails here, not silently in production.
  assert.equal(instancePattern("files://{+path}"), "^files://(.+)$");
  assert.equal(instancePattern("notes://{id}{?q}"), "^notes://([^/,]+)\\?q=([^&]+)$");
});

Deno.test("a URI that is an instance of a quarantined template is refused, naming the template", () => {
  const templates = [template("notes://{id}"), template("files://{+path}")];
  const reasonOf = (t: ResourceTemplate) =>
    t.uriTemplate.startsWith("files") ? "hidden" : undefined;
  assert.equal(
    quarantinedTemplateOf("files:///etc/passwd", templates, reasonOf),
    'hidden (its template "files://{+path}" matches this URI)',
  );
  assert.equal(quarantinedTemplateOf("notes://1", templates, reasonOf), undefined);
});

Deno.test("adjacent variables cannot make the check take polynomial time", () => {
  // The SDK's match (V8's backtracking) took 10 s on 400 characters with four variables.
  const stall = [template("x{a}{b}{c}{d}{e}{f}{g}{h}")];
  const started = performance.now();
  assert.equal(
    quarantinedTemplateOf("x" + "a".repeat(100_000) + "/", stall, quarantined),
    undefined,
  );
  assert.match(quarantinedTemplateOf("xaaaaaaaa", stall, quarantined) ?? "", /matches this URI/);
  assert.ok(performance.now() - started < 30_000, "linear, not polynomial");
});

Deno.test("a quarantined template that cannot be parsed refuses every read it could serve", () => {
  assert.match(
    quarantinedTemplateOf("anything://at/all", [template("broken://{unclosed")], quarantined) ?? "",
    /is quarantined by the scanner/,
  );
});
