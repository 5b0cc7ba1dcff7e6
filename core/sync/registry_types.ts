/**
 * The MCP Registry API's shapes (`GET /v0.1/servers`), as far as fleet sync reads them. Only the
 * fields sync uses are typed; the registry may send more, which is ignored.
 * @module
 */

/** The `_meta` key under which the official registry puts status and timestamps. */
export const OFFICIAL_META = "io.modelcontextprotocol.registry/official";

/** What the registry says about one input (an argument or a variable); all of it unchecked. */
export interface RegistryInput {
  description?: string;
  isRequired?: boolean;
  isSecret?: boolean;
  /** `string`, `number`, `boolean` or `filepath`. */
  format?: string;
  value?: string;
  default?: string;
  /** Only for arguments: `positional` or `named`. */
  type?: string;
}

/** One environment variable a package declares. */
export interface RegistryEnvVar extends RegistryInput {
  name: string;
}

/** One argument of a package or its runtime: `positional` (a value) or `named` (`--flag value`). */
export interface RegistryArgument extends RegistryInput {
  type: string;
  /** The flag of a named argument. */
  name?: string;
  /** What a positional argument stands for (`target_dir`). */
  valueHint?: string;
  isRepeated?: boolean;
}

/** One HTTP header a remote declares. */
export interface RegistryHeader {
  name: string;
  value?: string;
  isRequired?: boolean;
  isSecret?: boolean;
}

/** One installable package of a server. */
export interface RegistryPackage {
  registryType: string;
  identifier: string;
  version?: string;
  transport?: { type: string; url?: string };
  environmentVariables?: RegistryEnvVar[];
  /** Arguments for the runtime (npx, node): not passed under sandbox: deno. */
  runtimeArguments?: RegistryArgument[];
  /** Arguments for the package itself, after its name. */
  packageArguments?: RegistryArgument[];
}

/** One hosted endpoint of a server. */
export interface RegistryRemote {
  type: string;
  url: string;
  headers?: RegistryHeader[];
}

/** `ServerDetail`: a server at one version. */
export interface ServerDetail {
  /** Reverse-DNS namespace and a name, e.g. `io.github.acme/weather`. */
  name: string;
  version: string;
  description?: string;
  packages?: RegistryPackage[];
  remotes?: RegistryRemote[];
}

/** Lifecycle of a registry entry. */
export type RegistryStatus = "active" | "deprecated" | "deleted";

/** One server of a listing with the registry's own metadata. */
export interface RegistryServer {
  server: ServerDetail;
  status: RegistryStatus;
  updatedAt?: string;
  /** False when the registry says a newer version of this server exists. */
  isLatest?: boolean;
}
