import assert from "node:assert/strict";
import { MetricRegistry, OTHER_LABEL_VALUE } from "./metrics_registry.ts";

Deno.test("The exposition is HELP, TYPE, then samples per family, in declaration order, ending with a line feed", () => {
  const r = new MetricRegistry();
  const c = r.counter({ name: "calls_total", help: "Calls.", labelNames: ["tool"] });
  const g = r.gauge({ name: "queue", help: "Queued." });
  c.inc({ tool: "a" });
  c.inc({ tool: "b" }, 2);
  c.inc({ tool: "a" });
  g.set({}, 7);
  assert.equal(
    r.render(),
    [
      "# HELP calls_total Calls.",
      "# TYPE calls_total counter",
      'calls_total{tool="a"} 2',
      'calls_total{tool="b"} 2',
      "# HELP queue Queued.",
      "# TYPE queue gauge",
      "queue 7",
      "",
    ].join("\n"),
  );
});

Deno.test("Label values and HELP text are escaped in the exposition", () => {
  const r = new MetricRegistry();
  const c = r.counter({ name: "x_total", help: 'Line one\nline "two" \\ end', labelNames: ["v"] });
  c.inc({ v: 'quote " backslash \\ newline \n' });
  assert.equal(
    r.render(),
    '# HELP x_total Line one\\nline "two" \\\\ end\n' +
      "# TYPE x_total counter\n" +
      'x_total{v="quote \\" backslash \\\\ newline \\n"} 1\n',
  );
});

Deno.test("A family without series is left out of the exposition", () => {
  const r = new MetricRegistry();
  r.counter({ name: "never_total", help: "Never.", labelNames: ["a"] });
  const g = r.gauge({ name: "once", help: "Once." });
  assert.equal(r.render(), "");
  g.set({}, 1);
  g.reset();
  assert.equal(r.render(), "");
});

Deno.test("Histogram buckets are cumulative and end with +Inf, followed by _sum and _count", () => {
  const r = new MetricRegistry();
  const h = r.histogram({
    name: "d_seconds",
    help: "D.",
    labelNames: ["s"],
    buckets: [0.1, 1, 10],
  });
  for (const v of [0.05, 0.1, 0.5, 5, 50]) h.observe({ s: "x" }, v);
  assert.equal(
    r.render(),
    [
      "# HELP d_seconds D.",
      "# TYPE d_seconds histogram",
      'd_seconds_bucket{s="x",le="0.1"} 2',
      'd_seconds_bucket{s="x",le="1"} 3',
      'd_seconds_bucket{s="x",le="10"} 4',
      'd_seconds_bucket{s="x",le="+Inf"} 5',
      'd_seconds_sum{s="x"} 55.65',
      'd_seconds_count{s="x"} 5',
      "",
    ].join("\n"),
  );
});

Deno.test("A histogram refuses unordered or infinite buckets and an le label", () => {
  const r = new MetricRegistry();
  assert.throws(() => r.histogram({ name: "a", help: "", buckets: [1, 1] }), RangeError);
  assert.throws(() => r.histogram({ name: "b", help: "", buckets: [1, Infinity] }), RangeError);
  assert.throws(() => r.histogram({ name: "c", help: "", buckets: [] }), RangeError);
  assert.throws(
    () => r.histogram({ name: "d", help: "", labelNames: ["le"], buckets: [1] }),
    TypeError,
  );
});

Deno.test("A counter never goes down", () => {
  const c = new MetricRegistry().counter({ name: "c_total", help: "" });
  assert.throws(() => c.inc({}, -1), RangeError);
  assert.throws(() => c.inc({}, NaN), RangeError);
});

Deno.test("Invalid or duplicate names are refused at declaration", () => {
  const r = new MetricRegistry();
  r.gauge({ name: "g", help: "" });
  assert.throws(() => r.gauge({ name: "g", help: "" }), /already declared/);
  assert.throws(() => r.gauge({ name: "bad-name", help: "" }), /Invalid metric name/);
  assert.throws(() => r.gauge({ name: "h", help: "", labelNames: ["__x"] }), /Invalid label/);
  assert.throws(() => r.gauge({ name: "i", help: "", labelNames: ["a", "a"] }), /Duplicate/);
  assert.throws(
    () => r.gauge<"a">({ name: "j", help: "", labelNames: ["a"], fold: ["b" as "a"] }),
    /Cannot fold/,
  );
});

Deno.test("Past maxSeries, new series fold their fold labels into (other) and keep the rest", () => {
  const r = new MetricRegistry({ maxSeries: 2 });
  const c = r.counter({
    name: "calls_total",
    help: "C.",
    labelNames: ["server", "tool"],
    fold: ["tool"],
  });
  c.inc({ server: "s", tool: "a" });
  c.inc({ server: "s", tool: "b" });
  c.inc({ server: "s", tool: "c" });
  c.inc({ server: "s", tool: "d" });
  c.inc({ server: "t", tool: "e" });
  c.inc({ server: "s", tool: "a" }); // an existing series keeps counting
  assert.deepEqual(r.render().split("\n").slice(2, -1), [
    'calls_total{server="s",tool="a"} 2',
    'calls_total{server="s",tool="b"} 1',
    `calls_total{server="s",tool="${OTHER_LABEL_VALUE}"} 2`,
    `calls_total{server="t",tool="${OTHER_LABEL_VALUE}"} 1`,
  ]);
  assert.deepEqual(r.folds(), [{ name: "calls_total", folds: 3 }]);
});

Deno.test("Without fold labels every label folds, and the series count stays bounded", () => {
  const r = new MetricRegistry({ maxSeries: 3 });
  const c = r.counter({ name: "x_total", help: "", labelNames: ["a", "b"] });
  for (let i = 0; i < 1000; i++) c.inc({ a: `a${i}`, b: `b${i}` });
  const samples = r.render().split("\n").filter((l) => l.startsWith("x_total"));
  assert.equal(samples.length, 4);
  assert.equal(samples[3], 'x_total{a="(other)",b="(other)"} 997');
});

Deno.test("Folded series that are still unbounded collapse into one all-(other) series at twice maxSeries", () => {
  const r = new MetricRegistry({ maxSeries: 2 });
  // "server" is declared bounded (not folded) but is not: the hard ceiling still holds.
  const c = r.counter({
    name: "y_total",
    help: "",
    labelNames: ["server", "tool"],
    fold: ["tool"],
  });
  for (let i = 0; i < 100; i++) c.inc({ server: `s${i}`, tool: `t${i}` });
  const samples = r.render().split("\n").filter((l) => l.startsWith("y_total"));
  assert.equal(samples.length, 5);
  assert.equal(samples[4], 'y_total{server="(other)",tool="(other)"} 96');
});

Deno.test("beforeRender collectors run at every render, and setTotal mirrors an external count", () => {
  const r = new MetricRegistry();
  const c = r.counter({ name: "ext_total", help: "" });
  let external = 0;
  r.beforeRender(() => c.setTotal({}, external));
  external = 5;
  assert.match(r.render(), /^ext_total 5$/m);
  external = 9;
  assert.match(r.render(), /^ext_total 9$/m);
});

Deno.test("A histogram ignores NaN observations", () => {
  const r = new MetricRegistry();
  const h = r.histogram({ name: "h", help: "", buckets: [1] });
  h.observe({}, NaN);
  assert.equal(r.render(), "");
  h.observe({}, 2);
  assert.match(r.render(), /^h_bucket\{le="1"\} 0\nh_bucket\{le="\+Inf"\} 1\nh_sum 2\nh_count 1$/m);
});
