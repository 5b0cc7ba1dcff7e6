import assert from "node:assert/strict";
import { ANNOTATIONS, toCandidate } from "./k8s_source.ts";

Deno.test("a Service's own labels cannot pass for another namespace or Service on its candidate", () => {
  const candidate = toCandidate(
    {
      metadata: {
        name: "evil",
        namespace: "tenant-b",
        labels: { namespace: "kube-system", service: "trusted", app: "mcp" },
        annotations: { [ANNOTATIONS.enabled]: "true", [ANNOTATIONS.port]: "8080" },
      },
    } as Parameters<typeof toCandidate>[0],
  );
  assert.equal(candidate?.url, "http://evil.tenant-b.svc:8080/mcp");
  assert.deepEqual(candidate?.labels, { namespace: "tenant-b", service: "evil", app: "mcp" });
});
