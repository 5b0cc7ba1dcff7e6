/**
 * Test support: the MCP Inspector's CLI, run through npx as its README shows.
 * @module
 */
import { binaryInstalled } from "./needs_binary.ts";

/** The Inspector release the docs and tests use. */
export const INSPECTOR = "@modelcontextprotocol/inspector@2.12.0";

/** Whether `npx` is on PATH (the Inspector CLI runs through it). */
export function hasNpx(): boolean {
  return binaryInstalled(["npx"]);
}

/** Runs `npx -y <Inspector> --cli <args>` and returns its exit code and output. */
export async function inspectorCli(
  args: string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const run = await new Deno.Command("npx", {
    args: ["-y", INSPECTOR, "--cli", ...args],
    ...(options.cwd ? { cwd: options.cwd } : {}),
    env: { NO_COLOR: "1", ...options.env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: run.code, stdout: decode(run.stdout), stderr: decode(run.stderr) };
}
