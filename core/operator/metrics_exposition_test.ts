import assert from "node:assert/strict";
import {
  escapeHelp,
  escapeLabelValue,
  formatSample,
  formatValue,
  isLabelName,
  isMetricName,
} from "./metrics_exposition.ts";

Deno.test("Label values escape backslash, double quote and line feed, and nothing else", () => {
  assert.equal(escapeLabelValue('a\\b"c\nd'), 'a\\\\b\\"c\\nd');
  assert.equal(escapeLabelValue("tab\there, {braces}, = and é"), "tab\there, {braces}, = and é");
});

Deno.test("HELP text escapes backslash and line feed but keeps double quotes", () => {
  assert.equal(escapeHelp('say "hi"\\now\nplease'), 'say "hi"\\\\now\\nplease');
});

Deno.test("Values spell infinities and NaN as Prometheus reads them", () => {
  assert.equal(formatValue(Infinity), "+Inf");
  assert.equal(formatValue(-Infinity), "-Inf");
  assert.equal(formatValue(NaN), "NaN");
  assert.equal(formatValue(0.00025), "0.00025");
  assert.equal(formatValue(1e-7), "1e-7");
  assert.equal(formatValue(42), "42");
});

Deno.test("A sample without labels has no braces; with labels they keep their order", () => {
  assert.equal(formatSample("up", [], 1), "up 1");
  assert.equal(formatSample("x", [["b", "2"], ["a", 'q"']], 3), 'x{b="2",a="q\\""} 3');
});

Deno.test("Metric and label names follow the data model; __ label names are reserved", () => {
  assert.ok(isMetricName("agent33_tool_calls_total"));
  assert.ok(isMetricName("ns:rule_name"));
  assert.ok(!isMetricName("9lives"));
  assert.ok(!isMetricName("has-dash"));
  assert.ok(isLabelName("server"));
  assert.ok(!isLabelName("__name__"));
  assert.ok(!isLabelName("a:b"));
});
