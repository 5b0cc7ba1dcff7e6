/**
 * Reads kubeconfig files as `kubectl` does: `KUBECONFIG` is a list of files merged so that the
 * first file to define a name (cluster, user, context) or `current-context` wins, files that do
 * not exist are skipped, and every relative path in a file (CA, client certificate and key, token
 * file, exec command) is relative to that file's directory.
 * @module
 */
import { parse } from "yaml";
import { z } from "zod";

/** How to reach and trust one API server. */
export interface KubeCluster {
  server: string;
  /** PEM of the CA, from `certificate-authority-data`. */
  caData?: string;
  /** Absolute path of `certificate-authority`. */
  caFile?: string;
  insecureSkipTlsVerify?: boolean;
  tlsServerName?: string;
  proxyUrl?: string;
}

/** An `exec` credential plugin, with its command resolved against the kubeconfig's directory. */
export interface ExecConfig {
  apiVersion: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  installHint?: string;
}

/** How to authenticate as one user. */
export interface KubeUser {
  token?: string;
  tokenFile?: string;
  /** PEM from `client-certificate-data`. */
  certData?: string;
  certFile?: string;
  keyData?: string;
  keyFile?: string;
  exec?: ExecConfig;
  /** Set when the entry uses a mechanism this reader refuses (auth-provider, basic auth). */
  unsupported?: string;
}

/** A named pair of cluster and user. */
export interface KubeContext {
  cluster: string;
  user: string;
  namespace?: string;
}

/** One or more kubeconfig files, merged. */
export interface KubeConfig {
  currentContext?: string;
  contexts: Map<string, KubeContext>;
  clusters: Map<string, KubeCluster>;
  users: Map<string, KubeUser>;
  /** The files read, for messages. */
  files: string[];
}

/** What a context resolves to. */
export interface SelectedContext {
  name: string;
  cluster: KubeCluster;
  user: KubeUser;
  namespace?: string;
}

const CLUSTER = z.object({
  server: z.string().min(1),
  "certificate-authority": z.string().nullish(),
  "certificate-authority-data": z.string().nullish(),
  "insecure-skip-tls-verify": z.boolean().nullish(),
  "tls-server-name": z.string().nullish(),
  "proxy-url": z.string().nullish(),
}).loose();

const USER = z.object({
  token: z.string().nullish(),
  tokenFile: z.string().nullish(),
  "client-certificate": z.string().nullish(),
  "client-certificate-data": z.string().nullish(),
  "client-key": z.string().nullish(),
  "client-key-data": z.string().nullish(),
  username: z.string().nullish(),
  "auth-provider": z.object({ name: z.string() }).loose().nullish(),
  exec: z.object({
    apiVersion: z.string().min(1),
    command: z.string().min(1),
    args: z.array(z.string()).nullish(),
    env: z.array(z.object({ name: z.string().min(1), value: z.string() })).nullish(),
    installHint: z.string().nullish(),
  }).loose().nullish(),
}).loose();

const CONTEXT = z.object({
  cluster: z.string().min(1),
  user: z.string().min(1),
  namespace: z.string().nullish(),
}).loose();

const NAME = z.string().min(1);

const FILE = z.object({
  "current-context": z.string().nullish(),
  clusters: z.array(z.object({ name: NAME, cluster: CLUSTER }).loose()).nullish(),
  users: z.array(z.object({ name: NAME, user: USER.nullish() }).loose()).nullish(),
  contexts: z.array(z.object({ name: NAME, context: CONTEXT }).loose()).nullish(),
}).loose();

/** Parses one kubeconfig file's text; `path` anchors its relative paths and names it in errors. */
export function parseKubeconfig(text: string, path: string): KubeConfig {
  let raw: unknown;
  try {
    raw = parse(text, { maxAliasCount: 100 }) ?? {};
  } catch (error) {
    throw new Error(`kubeconfig ${path} is not valid YAML: ${(error as Error).message}`);
  }
  const parsed = FILE.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(
      `kubeconfig ${path}: ${issue.path.join(".") || "(top)"} ${issue.message}; ` +
        "fix the file or point KUBECONFIG at another",
    );
  }
  const file = parsed.data;
  const dir = dirname(path);
  const at = (p: string | null | undefined) => p ? resolvePath(dir, p) : undefined;
  const config: KubeConfig = {
    contexts: new Map(),
    clusters: new Map(),
    users: new Map(),
    files: [path],
  };
  if (file["current-context"]) config.currentContext = file["current-context"];
  for (const { name, cluster } of file.clusters ?? []) {
    if (config.clusters.has(name)) continue;
    config.clusters.set(
      name,
      defined({
        server: cluster.server,
        caData: pemOf(cluster["certificate-authority-data"], `cluster ${name}`, path),
        caFile: at(cluster["certificate-authority"]),
        insecureSkipTlsVerify: cluster["insecure-skip-tls-verify"] ?? undefined,
        tlsServerName: cluster["tls-server-name"] ?? undefined,
        proxyUrl: cluster["proxy-url"] ?? undefined,
      }),
    );
  }
  for (const { name, user } of file.users ?? []) {
    if (config.users.has(name)) continue;
    const u = user ?? {};
    const exec = u.exec
      ? defined({
        apiVersion: u.exec.apiVersion,
        // kubectl: a command with a path separator is relative to the file; a bare name is
        // looked up in PATH.
        command: u.exec.command.includes("/") ? resolvePath(dir, u.exec.command) : u.exec.command,
        args: u.exec.args ?? [],
        env: Object.fromEntries((u.exec.env ?? []).map((e) => [e.name, e.value])),
        installHint: u.exec.installHint ?? undefined,
      })
      : undefined;
    config.users.set(
      name,
      defined({
        token: u.token ?? undefined,
        tokenFile: at(u.tokenFile),
        certData: pemOf(u["client-certificate-data"], `user ${name}`, path),
        certFile: at(u["client-certificate"]),
        keyData: pemOf(u["client-key-data"], `user ${name}`, path),
        keyFile: at(u["client-key"]),
        exec,
        unsupported: u["auth-provider"]
          ? `auth-provider "${
            u["auth-provider"].name
          }" (use its exec credential plugin instead, e.g. kubelogin or gke-gcloud-auth-plugin)`
          : u.username
          ? "username/password (basic auth; use a token, a client certificate or exec)"
          : undefined,
      }),
    );
  }
  for (const { name, context } of file.contexts ?? []) {
    if (config.contexts.has(name)) continue;
    config.contexts.set(
      name,
      defined({
        cluster: context.cluster,
        user: context.user,
        namespace: context.namespace ?? undefined,
      }),
    );
  }
  return config;
}

/** Merges parsed files in order: the first to define a name or `current-context` wins. */
export function mergeKubeconfigs(configs: KubeConfig[]): KubeConfig {
  const merged: KubeConfig = {
    contexts: new Map(),
    clusters: new Map(),
    users: new Map(),
    files: [],
  };
  for (const config of configs) {
    merged.currentContext ??= config.currentContext;
    for (const key of ["contexts", "clusters", "users"] as const) {
      const target = merged[key] as Map<string, unknown>;
      for (const [name, value] of config[key]) if (!target.has(name)) target.set(name, value);
    }
    merged.files.push(...config.files);
  }
  return merged;
}

/** Reads and merges `paths`, skipping those that do not exist; undefined when none does. */
export async function loadKubeconfig(
  paths: string[],
  readTextFile: (path: string) => Promise<string> = Deno.readTextFile,
): Promise<KubeConfig | undefined> {
  const configs: KubeConfig[] = [];
  const seen = new Set<string>();
  for (const path of paths) {
    if (path === "" || seen.has(path)) continue;
    seen.add(path);
    let text: string;
    try {
      text = await readTextFile(path);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) continue;
      throw new Error(`kubeconfig ${path} cannot be read: ${(error as Error).message}`);
    }
    configs.push(parseKubeconfig(text, path));
  }
  return configs.length === 0 ? undefined : mergeKubeconfigs(configs);
}

/** The context named `name`, else `current-context`, with its cluster and user. */
export function selectContext(config: KubeConfig, name?: string): SelectedContext {
  const files = config.files.join(", ");
  const chosen = name ?? config.currentContext;
  const known = [...config.contexts.keys()].join(", ") || "none";
  if (!chosen) {
    throw new Error(
      `kubeconfig ${files} has no current-context; pass --context NAME (contexts: ${known})`,
    );
  }
  const context = config.contexts.get(chosen);
  if (!context) {
    throw new Error(`kubeconfig ${files} has no context "${chosen}"; contexts: ${known}`);
  }
  const cluster = config.clusters.get(context.cluster);
  if (!cluster) {
    throw new Error(
      `kubeconfig context "${chosen}" names cluster "${context.cluster}", which ${files} does not define`,
    );
  }
  const user = config.users.get(context.user);
  if (!user) {
    throw new Error(
      `kubeconfig context "${chosen}" names user "${context.user}", which ${files} does not define`,
    );
  }
  return defined({ name: chosen, cluster, user, namespace: context.namespace });
}

/** The `*-data` fields are base64 of PEM text. */
function pemOf(data: string | null | undefined, what: string, path: string): string | undefined {
  if (!data) return undefined;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(
      Uint8Array.from(atob(data.replace(/\s+/g, "")), (c) => c.charCodeAt(0)),
    );
  } catch {
    throw new Error(`kubeconfig ${path}: ${what} has *-data that is not base64 of PEM text`);
  }
}

function dirname(path: string): string {
  const at = path.lastIndexOf("/");
  return at <= 0 ? (at === 0 ? "/" : ".") : path.slice(0, at);
}

function resolvePath(dir: string, path: string): string {
  return path.startsWith("/") ? path : `${dir}/${path}`;
}

/** Drops undefined fields, so an absent setting is absent rather than `undefined`. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
