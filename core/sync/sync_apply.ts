/**
 * Writes chosen proposals to the fleet file in one edit through the fleet writer: validated
 * first, atomic, comments kept, the old text kept as `<file>.bak`. Either every chosen proposal
 * lands or none does.
 * @module
 */
import { parseDocument } from "yaml";
import {
  addServers,
  type FleetEdit,
  type FleetEditResult,
  removeServer,
  setServerEnabled,
} from "../proxy/fleet_writer.ts";
import { fileFleetStore, type FleetStore } from "../proxy/fleet_store.ts";
import { SYNC_MARKER } from "../proxy/fleet_origin.ts";
import { markerComment, type SyncProposal } from "./sync_plan.ts";

/**
 * Applies `proposals` to the fleet file at `path` (or to a fleet store: the cluster's shared
 * fleet); `validate` refuses a bad result.
 */
export async function applyProposals<V, R = never>(
  target: string | FleetStore,
  proposals: readonly SyncProposal[],
  validate: (text: string) => V,
  apply?: (validated: V) => Promise<R>,
): Promise<FleetEditResult<V, R>> {
  const store = typeof target === "string" ? fileFleetStore(target) : target;
  if (store.path !== undefined) await ensureFleetFile(store.path);
  // The directories chosen for declared paths: the server's own, readable by the gateway's user only.
  for (const dir of proposals.flatMap((p) => p.paths ?? [])) {
    await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  }
  return await store.edit(composeEdits(toEdits(proposals)), {
    validate,
    ...(apply ? { apply } : {}),
  });
}

/**
 * The edits of the proposals: first every removal, disable and the removal half of each update
 * (an updated entry moves to the end of the list, its marker with it), then every add in proposal
 * order as one edit, the same text as one edit per proposal without a parse per entry.
 */
function toEdits(proposals: readonly SyncProposal[]): FleetEdit[] {
  const edits: FleetEdit[] = [];
  const adds: { entry: Record<string, unknown>; comment: string }[] = [];
  for (const proposal of proposals) {
    if (proposal.action === "update" || proposal.action === "remove") {
      edits.push(unmark(proposal.server), removeServer(proposal.server));
    } else if (proposal.action === "disable") {
      edits.push(setServerEnabled(proposal.server, false));
    }
    if (proposal.action === "add" || proposal.action === "update") {
      adds.push({
        entry: proposal.entry ?? { id: proposal.server },
        comment: markerComment(proposal),
      });
    }
  }
  return [...edits, addServers(adds)];
}

/**
 * Drops the marker line above an entry. The writer takes comments along with an entry, but the
 * yaml library gives the first entry's comment to the list, so it would stay behind.
 */
function unmark(id: string): FleetEdit {
  return (_doc, text) => {
    const marked = new RegExp(
      `^[ \\t]*${escapeRegExp(SYNC_MARKER)}.*\\n(?=[ \\t]*- id: "?${escapeRegExp(id)}"?[ \\t]*$)`,
      "m",
    );
    const next = text.replace(marked, "");
    return next === text ? undefined : next;
  };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Runs edits one after the other, each on the text the previous one produced. */
function composeEdits(edits: FleetEdit[]): FleetEdit {
  return (doc, text) => {
    let current = text;
    let first = true;
    for (const edit of edits) {
      const next = edit(first ? doc : parseDocument(current), current);
      first = false;
      if (next !== undefined) current = next;
    }
    return current === text ? undefined : current;
  };
}

/** A first sync may create the fleet file. */
async function ensureFleetFile(path: string): Promise<void> {
  try {
    await Deno.lstat(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    await Deno.writeTextFile(
      path,
      "# Upstream MCP servers (see docs/fleet.md).\nproxy_servers:\n",
      {
        createNew: true,
      },
    ).catch((e) => {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    });
  }
}
