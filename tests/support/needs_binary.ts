/**
 * Test options for tests that need a system binary the project does not ship (nats-server,
 * Chromium): without it they are reported as ignored, with one line per `deno test` run saying
 * what is missing and how to install it, so `npx -y deno@2.9.6 task test` passes on a machine
 * with only Node. When `CI` is set they always run, and fail without it: `.ci/run` installs both.
 * @module
 */

/** Whether an executable file exists at one of `paths` (a bare name is looked up on PATH). */
export function binaryInstalled(paths: readonly string[]): boolean {
  const dirs = (Deno.env.get("PATH") ?? "").split(":").filter(Boolean);
  return paths.flatMap((path) => path.includes("/") ? [path] : dirs.map((d) => `${d}/${path}`))
    .some((path) => {
      try {
        return Deno.statSync(path).isFile;
      } catch {
        return false;
      }
    });
}

/**
 * `Deno.test(name, needsBinary(...), fn)`: ignored when none of `paths` exists and CI is not set;
 * `what` names the binary and `install` the command that installs it.
 */
export function needsBinary(
  what: string,
  paths: readonly string[],
  install: string,
): { ignore: boolean } {
  const skip = !Deno.env.get("CI") && !binaryInstalled(paths);
  if (skip) announceSkip(what, install);
  return { ignore: skip };
}

/**
 * Says it once per run: test files load in isolates of one process, so the first to create a
 * file named after the process id and the binary says it.
 */
function announceSkip(what: string, install: string): void {
  const slug = what.replace(/[^A-Za-z0-9]+/g, "-");
  try {
    Deno.openSync(`${Deno.env.get("TMPDIR") ?? "/tmp"}/agent33-skip-${slug}-${Deno.pid}`, {
      write: true,
      createNew: true,
    }).close();
  } catch {
    return; // another test file of this run said it already
  }
  Deno.stderr.writeSync(new TextEncoder().encode(
    `\n${what} is not installed: the tests that need it are skipped (reported as ignored); ` +
      `to run them: ${install} (with CI set they are required)\n`,
  ));
}
