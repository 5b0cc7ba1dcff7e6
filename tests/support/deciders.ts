/**
 * Test support: who decides an approval request in the governance unit tests.
 * @module
 */
import { principalOf } from "../../core/auth/token_payload.ts";
import type { Decider } from "../../core/governance/approval_queue.ts";

/** A tokens-file approver named `name` of `tenant` (default acme, the tests' requests' tenant). */
export function approver(name: string, tenant = "acme"): Decider {
  return {
    subject: name,
    principal: principalOf("tokens_file", name),
    tenant,
    scopes: ["approver"],
  };
}
