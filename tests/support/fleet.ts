/**
 * Test support: fleet files in temp dirs, reference servers from npm, fixture upstreams.
 * @module
 */

/** Pinned reference servers, run by Deno straight from npm. */
export const EVERYTHING = "npm:@modelcontextprotocol/server-everything@2026.8.31";
export const MEMORY = "npm:@modelcontextprotocol/server-memory@2026.8.31";
export const FILESYSTEM = "npm:@modelcontextprotocol/server-filesystem@2026.8.31";

const ROOT = new URL("../../", import.meta.url).pathname;

/** Absolute path of a fixture under tests/fixtures. */
export function fixture(path: string): string {
  return `${ROOT}tests/fixtures/${path}`;
}

/** A temp dir holding `fleet.yaml`; remove it when done. */
export async function writeFleet(
  yaml: string,
): Promise<{ dir: string; path: string; remove(): Promise<void> }> {
  const dir = await Deno.makeTempDir({ prefix: "agent33-fleet-" });
  const path = `${dir}/fleet.yaml`;
  await Deno.writeTextFile(path, yaml);
  return { dir, path, remove: () => Deno.remove(dir, { recursive: true }) };
}

/** Polls `check` until it is true or the deadline passes (for real processes only). */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  what: string,
  ms = 20_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A fleet entry for the fault fixture (tests/fixtures/upstreams/fault_server.ts) under
 * `sandbox: deno`: `fault` selects its misbehaviour (default `none`), `args` are appended to its
 * command, and `extra` is more YAML for the entry (lines indented four spaces, newline-ended).
 */
export function faultServer(
  id: string,
  options: { fault?: string; args?: string[]; extra?: string } = {},
): string {
  const command = [
    "deno",
    "run",
    "--config",
    `${ROOT}deno.json`,
    fixture("upstreams/fault_server.ts"),
    ...(options.args ?? []),
  ];
  return `
  - id: ${id}
    command: ${JSON.stringify(command)}
    sandbox: deno
    env: { FAULT: ${options.fault ?? "none"} }
    permissions: { env: [FAULT], read: true }
${options.extra ?? ""}`;
}

/** A fleet entry for server-everything over stdio, sandboxed with env and read granted. */
export function everythingServer(id = "everything"): string {
  return `
  - id: ${id}
    command: ["deno", "run", "${EVERYTHING}", "stdio"]
    sandbox: deno
    permissions:
      env: true
      read: true
`;
}

/** A fleet entry for server-memory keeping its graph in `dataDir` (sandboxed to that folder). */
export function memoryServer(dataDir: string, id = "memory"): string {
  return `
  - id: ${id}
    command: ["deno", "run", "${MEMORY}"]
    sandbox: deno
    env:
      MEMORY_FILE_PATH: ${dataDir}/memory.json
    permissions:
      env: [MEMORY_FILE_PATH]
      read: ["${dataDir}"]
      write: ["${dataDir}"]
`;
}

/** The command that runs a fixture (a path under tests/fixtures/) unsandboxed, with the project's config. */
export function fixtureCommand(path: string): string[] {
  return ["deno", "run", "-A", "--config", `${ROOT}deno.json`, fixture(path)];
}
