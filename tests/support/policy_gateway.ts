/**
 * Test support: a gateway over a fleet and one policy file, whose callers hold HS256 JWTs signed
 * with {@link JWT_SECRET} (tenant and scopes as claims), cleaned up afterwards.
 * @module
 */
import { SignJWT } from "jose";
import { writeFleet } from "./fleet.ts";
import { startGateway, type TestGateway } from "./gateway.ts";

/** The HS256 secret the gateway of {@link withPolicyGateway} verifies JWTs with. */
export const JWT_SECRET = "a-jwt-secret-of-at-least-thirty-two-bytes";

/**
 * Runs `fn` against a started gateway over `fleetYaml` and `policy` (written as policy.yaml in
 * `policyDir`, the gateway's MCP_POLICY_PATH), its fleet started.
 */
export async function withPolicyGateway(
  fleetYaml: string,
  policy: string,
  fn: (gateway: TestGateway, policyDir: string) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  const fleet = await writeFleet(fleetYaml);
  const policyDir = await Deno.makeTempDir({ prefix: "agent33-policy-" });
  await Deno.writeTextFile(`${policyDir}/policy.yaml`, policy);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: policyDir,
    MCP_AUTH_JWT_SECRET: JWT_SECRET,
    ...env,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway, policyDir);
  } finally {
    await gateway.stop();
    await fleet.remove();
    await Deno.remove(policyDir, { recursive: true });
  }
}

/**
 * A five-minute JWT of `tenant` for `sub` (none when undefined) holding `scope` (space-separated
 * gateway scopes), bound to `audience` when given.
 */
export function policyJwt(
  tenant: string,
  sub: string | undefined,
  scope: string,
  audience?: string[],
): Promise<string> {
  const jwt = new SignJWT({ tenant, scope }).setProtectedHeader({ alg: "HS256" });
  if (sub !== undefined) jwt.setSubject(sub);
  if (audience !== undefined) jwt.setAudience(audience);
  return jwt.setIssuedAt().setExpirationTime("5m").sign(new TextEncoder().encode(JWT_SECRET));
}
