/**
 * The resolved environment: `.env` under the process's variables, read once at the start and
 * handed to the config, the fleet and the plugins. The one place that reads `Deno.env`.
 * @module
 */
import { readDotenv } from "./dotenv.ts";

/** Where {@link loadEnvironment} reads from: the process's variables and a `.env` file by default. */
export interface EnvironmentSource {
  env?: Record<string, string>;
  envFile?: string;
}

/** The process's own variables, without `.env`: for a caller handed no resolved environment. */
export function processEnvironment(): Record<string, string> {
  return Deno.env.toObject();
}

/** The resolved environment: `.env` with the process variables over it (config and fleet read it). */
export async function loadEnvironment(
  options: EnvironmentSource = {},
): Promise<Record<string, string>> {
  const env = options.env ?? processEnvironment();
  const fromFile = await readDotenv(options.envFile ?? ".env");
  return { ...fromFile, ...env };
}
