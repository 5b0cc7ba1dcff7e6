import assert from "node:assert/strict";
import { slugOf, uniqueId } from "./registry_mapping.ts";

Deno.test("A registry name slugs to the namespace's last label and the name, valid as a fleet id", () => {
  assert.equal(slugOf("io.github.acme/weather"), "acme-weather");
  assert.equal(slugOf("com.example/Search_API"), "example-search-api");
  assert.equal(slugOf("io.github.x/a.b"), "x-a-b");
});

Deno.test("A slug already taken gets the next free -N suffix", () => {
  assert.equal(
    uniqueId("acme-weather", new Set(["acme-weather", "acme-weather-2"])),
    "acme-weather-3",
  );
});
