/**
 * The manifests in deploy/kubernetes are well-formed without a cluster: each document validates
 * against the Kubernetes OpenAPI schema of its kind (kubernetes-models: ajv validators compiled from
 * the official OpenAPI spec, with required fields, types and formats), and strictly, as
 * `kubectl apply`'s field validation does, with no field the API does not define (the official
 * API types of kubernetes-types, as object literals under TypeScript's excess-property check).
 * Then what the gateway itself needs: its config parses, its env passes the gateway's own
 * validation, and the names across the manifests agree.
 */
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { Namespace } from "kubernetes-models/v1/Namespace";
import { ServiceAccount } from "kubernetes-models/v1/ServiceAccount";
import { Service } from "kubernetes-models/v1/Service";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { ClusterRole } from "kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole";
import { ClusterRoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { parseFleetConfig } from "../../core/proxy/fleet_config.ts";
import { parsePolicies } from "../../core/governance/policy_loader.ts";
import { resolveConfig } from "../../core/config/config.ts";

const DIR = new URL("../../deploy/kubernetes/", import.meta.url);

type Doc = Record<string, unknown> & { apiVersion: string; kind: string };

/** `<apiVersion> <kind>` → the OpenAPI validator of that kind. */
const OPENAPI: Record<string, new (data: never) => { validate(): void }> = {
  "v1 Namespace": Namespace,
  "v1 ServiceAccount": ServiceAccount,
  "v1 Service": Service,
  "v1 ConfigMap": ConfigMap,
  "apps/v1 Deployment": Deployment,
  "rbac.authorization.k8s.io/v1 ClusterRole": ClusterRole,
  "rbac.authorization.k8s.io/v1 ClusterRoleBinding": ClusterRoleBinding,
  "networking.k8s.io/v1 NetworkPolicy": NetworkPolicy,
  "policy/v1 PodDisruptionBudget": PodDisruptionBudget,
};

/** Every document of the files kustomization.yaml lists, with its file. */
async function manifests(): Promise<{ file: string; doc: Doc }[]> {
  const kustomization = await readYaml("kustomization.yaml");
  const out: { file: string; doc: Doc }[] = [];
  for (const file of (kustomization[0] as { resources: string[] }).resources) {
    for (const doc of await readYaml(file)) out.push({ file, doc: doc as Doc });
  }
  return out;
}

async function readYaml(file: string): Promise<unknown[]> {
  const text = await Deno.readTextFile(new URL(file, DIR));
  return parseAllDocuments(text).map((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0]!.message}`);
    return d.toJS();
  });
}

const find = async <T = Doc>(kind: string): Promise<T> => {
  const found = (await manifests()).find(({ doc }) => doc.kind === kind);
  assert.ok(found, `no ${kind} in deploy/kubernetes`);
  return found.doc as T;
};

// --- strict: the official types, with TypeScript's excess-property check ----------------------

/** `<apiVersion> <kind>` → the kubernetes-types module and interface of that kind. */
const TYPES: Record<string, [string, string]> = {
  "v1 Namespace": ["core/v1", "Namespace"],
  "v1 ServiceAccount": ["core/v1", "ServiceAccount"],
  "v1 Service": ["core/v1", "Service"],
  "v1 ConfigMap": ["core/v1", "ConfigMap"],
  "apps/v1 Deployment": ["apps/v1", "Deployment"],
  "rbac.authorization.k8s.io/v1 ClusterRole": ["rbac/v1", "ClusterRole"],
  "rbac.authorization.k8s.io/v1 ClusterRoleBinding": ["rbac/v1", "ClusterRoleBinding"],
  "networking.k8s.io/v1 NetworkPolicy": ["networking/v1", "NetworkPolicy"],
  "policy/v1 PodDisruptionBudget": ["policy/v1", "PodDisruptionBudget"],
};

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

/**
 * Type-checks each set of documents as object literals of their kubernetes-types interfaces, in one
 * `deno check`: a field the API does not define, a wrong type or a missing required field is a
 * type error. Returns the errors of each set, by set name.
 */
async function strictErrors(sets: Record<string, Doc[]>): Promise<Record<string, string[]>> {
  const dir = await Deno.makeTempDir({ prefix: "k8s-manifests-" });
  try {
    const files: Record<string, string> = {};
    for (const [name, docs] of Object.entries(sets)) {
      const lines = docs.map((doc, i) => {
        const type = TYPES[`${doc.apiVersion} ${doc.kind}`];
        if (!type) {
          throw new Error(`no kubernetes-types interface for ${doc.apiVersion} ${doc.kind}`);
        }
        return `import type { ${type[1]} as T${i} } from "kubernetes-types/${type[0]}.d.ts";\n` +
          `export const doc${i}: T${i} = ${JSON.stringify(doc)};`;
      });
      files[name] = `${dir}/${name}.ts`;
      await Deno.writeTextFile(files[name], lines.join("\n") + "\n");
    }
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["check", "--config", DENO_JSON, "--quiet", ...Object.values(files)],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(output.stderr) + new TextDecoder().decode(output.stdout);
    const errors: Record<string, string[]> = {};
    // Each error is "TS<code> [ERROR]: message ... at file:///<dir>/<name>.ts:line:col".
    const blocks = text.split(/\n(?=TS\d+ \[ERROR\])/).filter((b) => /^TS\d+/.test(b.trim()));
    for (const name of Object.keys(sets)) {
      errors[name] = blocks.filter((b) => b.includes(`/${name}.ts:`)).map((b) => b.trim());
    }
    const attributed = Object.values(errors).flat().length;
    if (!output.success && attributed === 0) throw new Error(`deno check failed: ${text}`);
    return errors;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function openApiError(doc: Doc): string | undefined {
  const Model = OPENAPI[`${doc.apiVersion} ${doc.kind}`];
  if (!Model) return `no validator for ${doc.apiVersion} ${doc.kind}`;
  try {
    new Model(doc as never).validate();
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

// --- the rules --------------------------------------------------------------------------

Deno.test("kustomization.yaml lists every manifest in deploy/kubernetes", async () => {
  const listed = new Set(
    ((await readYaml("kustomization.yaml"))[0] as { resources: string[] }).resources,
  );
  const files = [...Deno.readDirSync(DIR)]
    .map((e) => e.name)
    .filter((n) => n.endsWith(".yaml") && n !== "kustomization.yaml");
  assert.deepEqual(files.sort(), [...listed].sort());
  // Every kind has its validators; the PodDisruptionBudget is the cluster overlay's.
  assert.deepEqual(
    [...(await manifests()).map(({ doc }) => doc.kind), "PodDisruptionBudget"].sort(),
    Object.keys(OPENAPI).map((k) => k.split(" ")[1]).sort(),
  );
});

Deno.test("every manifest validates against the Kubernetes OpenAPI schema of its kind", async () => {
  for (const { file, doc } of await manifests()) {
    assert.equal(openApiError(doc), undefined, `${file} ${doc.kind}`);
  }
});

Deno.test("no manifest has a field the Kubernetes API does not define, and the validators catch a misspelled field, a wrong type and a missing required field", async () => {
  const all = (await manifests()).map(({ doc }) => doc);
  const deployment = all.find((d) => d.kind === "Deployment")!;
  const copy = () => structuredClone(deployment) as Doc & { spec: Record<string, unknown> };
  // A security setting under the wrong name would be silently ignored by a lenient check.
  const typo = copy();
  const container = (typo.spec as { template: { spec: { containers: Record<string, unknown>[] } } })
    .template.spec.containers[0]!;
  container.securityContext = { readOnlyRootFileSystem: true };
  assert.equal(openApiError(typo), undefined, "the OpenAPI schema allows unknown fields");
  const wrongType = copy();
  wrongType.spec.replicas = "1";
  assert.match(openApiError(wrongType) ?? "", /replicas must be integer/);
  const noSelector = copy();
  delete noSelector.spec.selector;
  assert.match(openApiError(noSelector) ?? "", /required property '?selector/);

  const errors = await strictErrors({
    manifests: all,
    typo: [typo],
    wrongtype: [wrongType],
    noselector: [noSelector],
  });
  assert.deepEqual(errors.manifests, []);
  assert.match(
    errors.typo!.join("\n"),
    /'"readOnlyRootFileSystem"' does not exist in type 'SecurityContext'/,
  );
  assert.match(errors.wrongtype!.join("\n"), /Type 'string' is not assignable to type 'number'/);
  assert.match(errors.noselector!.join("\n"), /Property 'selector' is missing/);
});

type Container = {
  name: string;
  image: string;
  ports: { name: string; containerPort: number }[];
  env: {
    name: string;
    value?: string;
    valueFrom?: { secretKeyRef: { name: string; key: string } };
  }[];
  securityContext: Record<string, unknown>;
  resources: { requests: Record<string, string>; limits: Record<string, string> };
  livenessProbe: { httpGet: { path: string; port: string } };
  readinessProbe: { httpGet: { path: string; port: string } };
  startupProbe: { httpGet: { path: string; port: string } };
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
};
type PodSpec = {
  serviceAccountName: string;
  securityContext: Record<string, unknown>;
  containers: Container[];
  volumes: { name: string; configMap?: { name: string } }[];
};
type DeploymentDoc = {
  spec: {
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
};

Deno.test("the gateway runs as non-root on a read-only root file system with no capabilities, probed on /healthz and /readyz", async () => {
  const { spec } = await find<DeploymentDoc>("Deployment");
  const pod = spec.template.spec;
  const [gateway] = pod.containers;
  assert.ok(gateway);
  assert.equal(pod.securityContext.runAsNonRoot, true);
  assert.deepEqual(pod.securityContext.seccompProfile, { type: "RuntimeDefault" });
  assert.equal(gateway.securityContext.readOnlyRootFilesystem, true);
  assert.equal(gateway.securityContext.allowPrivilegeEscalation, false);
  assert.deepEqual(gateway.securityContext.capabilities, { drop: ["ALL"] });
  assert.equal(gateway.livenessProbe.httpGet.path, "/healthz");
  assert.equal(gateway.startupProbe.httpGet.path, "/healthz");
  assert.equal(gateway.readinessProbe.httpGet.path, "/readyz");
  assert.ok(gateway.resources.requests.cpu && gateway.resources.requests.memory);
  assert.ok(gateway.resources.limits.memory);
  // What it writes is a mounted volume; the configuration is mounted read-only.
  const env = Object.fromEntries(gateway.env.map((e) => [e.name, e.value]));
  const mounts = new Map(gateway.volumeMounts.map((m) => [m.mountPath, m]));
  assert.ok(mounts.has(env.MCP_DATA_DIR!));
  assert.equal(mounts.get("/etc/agent33")?.readOnly, true);
  assert.ok(mounts.has("/tmp"));
});

Deno.test("names agree: selectors match the pod labels, the Service targets the container port, the ConfigMap and ServiceAccount exist", async () => {
  const deployment = await find<DeploymentDoc>("Deployment");
  const service = await find<
    { spec: { selector: Record<string, string>; ports: { targetPort: string }[] } }
  >("Service");
  const policy = await find<
    {
      spec: {
        podSelector: { matchLabels: Record<string, string> };
        ingress: { ports: { port: string }[] }[];
      };
    }
  >("NetworkPolicy");
  const labels = deployment.spec.template.metadata.labels;
  const matches = (selector: Record<string, string>) =>
    Object.entries(selector).every(([k, v]) => labels[k] === v);
  assert.ok(matches(deployment.spec.selector.matchLabels));
  assert.ok(matches(service.spec.selector));
  assert.ok(matches(policy.spec.podSelector.matchLabels));
  const pod = deployment.spec.template.spec;
  const portNames = pod.containers[0]!.ports.map((p) => p.name);
  assert.ok(portNames.includes(service.spec.ports[0]!.targetPort));
  assert.ok(portNames.includes(policy.spec.ingress[0]!.ports[0]!.port));
  const account = await find<{ metadata: { name: string } }>("ServiceAccount");
  assert.equal(pod.serviceAccountName, account.metadata.name);
  const configMap = await find<{ metadata: { name: string } }>("ConfigMap");
  assert.ok(pod.volumes.some((v) => v.configMap?.name === configMap.metadata.name));
});

Deno.test("RBAC lets the gateway's ServiceAccount get, list and watch Services, and nothing else", async () => {
  const role = await find<{ metadata: { name: string }; rules: unknown[] }>("ClusterRole");
  assert.deepEqual(role.rules, [{
    apiGroups: [""],
    resources: ["services"],
    verbs: ["get", "list", "watch"],
  }]);
  const binding = await find<{ roleRef: { kind: string; name: string }; subjects: unknown[] }>(
    "ClusterRoleBinding",
  );
  assert.deepEqual(binding.roleRef, {
    apiGroup: "rbac.authorization.k8s.io",
    kind: "ClusterRole",
    name: role.metadata.name,
  });
  const account = await find<{ metadata: { name: string; namespace: string } }>("ServiceAccount");
  assert.deepEqual(binding.subjects, [
    { kind: "ServiceAccount", name: account.metadata.name, namespace: account.metadata.namespace },
  ]);
});

Deno.test("the ConfigMap's fleet and policy parse with the gateway's own parsers, and the Deployment's env passes its configuration check", async () => {
  const configMap = await find<{ data: Record<string, string> }>("ConfigMap");
  const { spec } = await find<DeploymentDoc>("Deployment");
  const gateway = spec.template.spec.containers[0]!;
  const env: Record<string, string> = {};
  for (const entry of gateway.env) {
    // Secrets are created by the operator; stand in a fresh random value of the documented shape.
    env[entry.name] = entry.value ??
      [...crypto.getRandomValues(new Uint8Array(32))].map((b) => b.toString(16).padStart(2, "0"))
        .join("");
    if (entry.valueFrom) assert.equal(entry.valueFrom.secretKeyRef.name, "agent33-tokens");
  }
  const config = resolveConfig(env);
  assert.equal(config.server.host, "0.0.0.0");
  const fleetPath = env.MCP_PROXY_CONFIG_PATH!;
  const policyPath = env.MCP_POLICY_PATH!;
  const file = (path: string) => {
    assert.ok(path.startsWith("/etc/agent33/"), path);
    const text = configMap.data[path.slice("/etc/agent33/".length)];
    assert.ok(text, `the ConfigMap has no ${path}`);
    return text;
  };
  const fleet = parseFleetConfig(file(fleetPath), fleetPath, env, {
    separator: "__",
    healthIntervalSeconds: 30,
  });
  assert.deepEqual(fleet.servers.map((s) => s.id), ["weather"]);
  const policies = parsePolicies([{ path: policyPath, text: file(policyPath) }]);
  assert.ok(policies.connectors.has("weather"));
});

// --- the cluster overlay (deploy/kubernetes/cluster) -------------------------------------

const CLUSTER_DIR = new URL("cluster/", DIR);

type PatchOp = { op: string; path: string; value?: unknown };

/** Applies RFC 6902 `add` and `replace` operations (all the overlay uses) to a copy of `doc`. */
function applyJsonPatch(doc: Doc, ops: PatchOp[]): Doc {
  const out = structuredClone(doc) as Record<string, unknown>;
  for (const { op, path, value } of ops) {
    assert.ok(op === "add" || op === "replace", `unsupported patch op ${op} at ${path}`);
    const keys = path.split("/").slice(1).map((k) => k.replaceAll("~1", "/").replaceAll("~0", "~"));
    const last = keys.pop()!;
    let parent: unknown = out;
    for (const key of keys) {
      parent = (parent as Record<string, unknown>)[key];
      assert.ok(parent !== undefined, `patch path ${path} does not exist`);
    }
    if (Array.isArray(parent)) {
      if (last === "-") parent.push(value);
      else parent.splice(Number(last), op === "replace" ? 1 : 0, value);
    } else {
      const target = parent as Record<string, unknown>;
      assert.ok(op === "add" || last in target, `replace of a missing ${path}`);
      target[last] = value;
    }
  }
  return out as Doc;
}

/** What `kubectl kustomize deploy/kubernetes/cluster` renders: the base, patched, and more. */
async function clusterManifests(): Promise<{ file: string; doc: Doc }[]> {
  const text = await Deno.readTextFile(new URL("kustomization.yaml", CLUSTER_DIR));
  const kustomization = parseAllDocuments(text)[0]!.toJS() as {
    namespace: string;
    resources: string[];
    patches: { path: string; target: { kind: string; name: string } }[];
  };
  assert.equal(kustomization.resources[0], "../", "the overlay builds on the base");
  let out = await manifests();
  for (const patch of kustomization.patches) {
    const ops = await readYaml(`cluster/${patch.path}`);
    out = out.map(({ file, doc }) => {
      const meta = doc.metadata as { name: string };
      const hit = doc.kind === patch.target.kind && meta.name === patch.target.name;
      return { file, doc: hit ? applyJsonPatch(doc, ops[0] as PatchOp[]) : doc };
    });
  }
  for (const file of kustomization.resources.slice(1)) {
    for (const doc of await readYaml(`cluster/${file}`)) {
      const typed = doc as Doc & { metadata: { namespace?: string } };
      assert.equal(typed.metadata.namespace, kustomization.namespace, file);
      out.push({ file: `cluster/${file}`, doc: typed });
    }
  }
  return out;
}

Deno.test("the cluster overlay lists its files, and everything it renders validates strictly against the Kubernetes API", async () => {
  const text = await Deno.readTextFile(new URL("kustomization.yaml", CLUSTER_DIR));
  const kustomization = parseAllDocuments(text)[0]!.toJS() as {
    resources: string[];
    patches: { path: string }[];
  };
  const listed = [...kustomization.resources.slice(1), ...kustomization.patches.map((p) => p.path)];
  const files = [...Deno.readDirSync(CLUSTER_DIR)].map((e) => e.name)
    .filter((n) => n.endsWith(".yaml") && n !== "kustomization.yaml");
  assert.deepEqual(files.sort(), listed.sort());
  const rendered = await clusterManifests();
  for (const { file, doc } of rendered) {
    assert.equal(openApiError(doc), undefined, `${file} ${doc.kind}`);
  }
  const errors = await strictErrors({ cluster: rendered.map(({ doc }) => doc) });
  assert.deepEqual(errors.cluster, []);
});

Deno.test("the cluster overlay runs 3 replicas in cluster mode: NATS_URL, KV replicas 3, the pod name as replica id, a PDB and egress to NATS", async () => {
  const rendered = (await clusterManifests()).map(({ doc }) => doc);
  const deployment = rendered.find((d) => d.kind === "Deployment") as unknown as
    & DeploymentDoc
    & { spec: { replicas: number } };
  assert.equal(deployment.spec.replicas, 3);
  const pod = deployment.spec.template.spec;
  const gateway = pod.containers[0]! as Container & {
    env: { name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  };
  const byName = new Map(gateway.env.map((e) => [e.name, e]));
  assert.deepEqual(byName.get("MCP_REPLICA_ID")?.valueFrom, {
    fieldRef: { fieldPath: "metadata.name" },
  });
  const env: Record<string, string> = {};
  for (const entry of gateway.env) {
    env[entry.name] = entry.value ??
      (entry.valueFrom?.fieldRef
        ? "agent33-gateway-7d9f8c6b5d-x2z9q"
        : [...crypto.getRandomValues(new Uint8Array(32))].map((b) =>
          b.toString(16).padStart(2, "0")
        )
          .join(""));
  }
  const config = resolveConfig(env);
  assert.deepEqual(
    { ...config.cluster, heartbeatMs: undefined },
    {
      replicaId: "agent33-gateway-7d9f8c6b5d-x2z9q",
      kvReplicas: 3,
      heartbeatMs: undefined,
      configSource: "mounted",
    },
  );
  assert.match(config.natsUrl ?? "", /^nats:\/\/nats\.nats\.svc\.cluster\.local:4222$/);
  const labels = deployment.spec.template.metadata.labels;
  const matches = (selector: Record<string, string>) =>
    Object.entries(selector).every(([k, v]) => labels[k] === v);
  const pdb = rendered.find((d) => d.kind === "PodDisruptionBudget") as unknown as {
    spec: { maxUnavailable: number; selector: { matchLabels: Record<string, string> } };
  };
  assert.equal(pdb.spec.maxUnavailable, 1);
  assert.ok(matches(pdb.spec.selector.matchLabels));
  const nats = rendered.find((d) =>
    d.kind === "NetworkPolicy" && (d.metadata as { name: string }).name === "agent33-gateway-nats"
  ) as unknown as {
    spec: {
      podSelector: { matchLabels: Record<string, string> };
      egress: { ports: { port: number }[] }[];
    };
  };
  assert.ok(matches(nats.spec.podSelector.matchLabels));
  assert.equal(nats.spec.egress[0]!.ports[0]!.port, Number(new URL(config.natsUrl!).port));
});
