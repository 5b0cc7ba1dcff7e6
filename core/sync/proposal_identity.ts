/**
 * What binds an operator's decision to the proposal they reviewed. An id (`add:lan-notes`) names a
 * slot, not a content: discovery works its ids out again on every request, so the same id can
 * point at another URL a moment later, and a registry and a discovery proposal can share one. The
 * digest is the SHA-256 of exactly what applying the proposal writes or does, so apply can refuse
 * a proposal that changed since it was listed.
 * @module
 */
import { createHash } from "node:crypto";
import type { SyncProposal } from "./sync_plan.ts";

/** A proposal as listed: with the digest apply checks. */
export type ListedProposal = SyncProposal & { digest: string };

/** The text a proposal's digest is taken of: its written YAML, else its action in one line. */
export function digestText(proposal: SyncProposal): string {
  // The YAML holds the marker, the entry's id and every field written (declared paths too, as
  // its permissions); the action and server are bound by the id, which apply matches first.
  if ((proposal.action === "add" || proposal.action === "update") && proposal.yaml !== undefined) {
    return proposal.yaml;
  }
  // planSync spreads the registry's `{ name, version }` into a disable, outside SyncProposal's type.
  const version = proposal.from ?? proposal.to ??
    (proposal as { version?: unknown }).version ?? "";
  return `${proposal.action} ${proposal.server} ${proposal.name ?? ""}@${String(version)}`;
}

/** The SHA-256 hex of {@link digestText}: what `GET proposals` lists and apply compares. */
export function proposalDigest(proposal: SyncProposal): string {
  // Synchronous (node:crypto) so listing stays a plain function; a listing hashes each proposal.
  return createHash("sha256").update(digestText(proposal), "utf8").digest("hex");
}

/**
 * The proposals as listed and as apply sees them: each with its digest, one per id. Of two with
 * the same id the first is kept and `onShadowed` hears of the other.
 */
export function listedProposals(
  proposals: readonly SyncProposal[],
  onShadowed: (kept: SyncProposal, shadowed: SyncProposal) => void = () => {},
): ListedProposal[] {
  // Renaming the later one would write an entry nobody computed (its id is inside its YAML), and
  // keeping both lets a lookup by id pick either. The first (the registry's, planned against the
  // fleet file) stays; once it is applied the fleet holds its id, so discovery's next listing
  // gives the other an id of its own.
  const byId = new Map<string, ListedProposal>();
  for (const proposal of proposals) {
    const kept = byId.get(proposal.id);
    if (kept) onShadowed(kept, proposal);
    else byId.set(proposal.id, { ...proposal, digest: proposalDigest(proposal) });
  }
  return [...byId.values()];
}
