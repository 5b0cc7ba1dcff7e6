/**
 * Writes chosen proposals to the fleet file in one edit through the fleet writer: validated
 * first, atomic, comments kept, the old text kept as `<file>.bak`. Either every chosen proposal
 * lands or none does.
 * @module
 */
import { isMap, isSeq, parseDocument } from "yaml";
import {
  addServer,
  editFleetFile,
  type FleetEdit,
  type FleetEditResult,
  removeServer,
  setServerEnabled,
} from "../proxy/fleet_writer.ts";
import { SYNC_MARKER, type SyncProposal } from "./sync_plan.ts";

/** Applies `proposals` to the fleet file at `path`; `validate` refuses a bad result. */
export async function applyProposals<V, R = never>(
  path: string,
  proposals: readonly SyncProposal[],
  validate: (text: string) => V,
  apply?: (validated: V) => Promise<R>,
): Promise<FleetEditResult<V, R>> {
  await ensureFleetFile(path);
  return await editFleetFile(path, composeEdits(proposals.map(toEdit)), {
    validate,
    ...(apply ? { apply } : {}),
  });
}

/** The edit of one proposal. */
function toEdit(proposal: SyncProposal): FleetEdit {
  switch (proposal.action) {
    case "add":
      return addSynced(proposal);
    case "update":
      // The entry moves to the end of the list: its comment marker goes with it.
      return composeEdits([
        unmark(proposal.server),
        removeServer(proposal.server),
        addSynced(proposal),
      ]);
    case "disable":
      return setServerEnabled(proposal.server, false);
    case "remove":
      return composeEdits([unmark(proposal.server), removeServer(proposal.server)]);
  }
}

/** Appends the entry, with the marker line that lets later syncs recognise it. */
function addSynced(proposal: SyncProposal): FleetEdit {
  const add = addServer(proposal.entry ?? { id: proposal.server });
  return (doc, text) => {
    const block = blockList(doc);
    // An empty list has no ranges to go stale: the converted document itself is edited.
    const blockDoc = block === undefined || isEmptyList(doc) ? doc : parseDocument(block);
    const added = add(blockDoc, block ?? text) ?? block ?? text;
    const line = new RegExp(`^([ \\t]*)- id: "?${proposal.server}"?[ \\t]*$`, "gm");
    let match: RegExpExecArray | null = null;
    for (let m = line.exec(added); m !== null; m = line.exec(added)) match = m;
    if (match === null) return added;
    const comment = proposal.marker ?? `${SYNC_MARKER} ${proposal.name}@${proposal.to}`;
    const marker = `${match[1]}${comment}\n`;
    return added.slice(0, match.index) + marker + added.slice(match.index);
  };
}

/**
 * Drops the marker line above an entry. The writer takes comments along with an entry, but the
 * yaml library gives the first entry's comment to the list, so it would stay behind.
 */
function unmark(id: string): FleetEdit {
  return (_doc, text) => {
    const marked = new RegExp(
      `^[ \\t]*${escapeRegExp(SYNC_MARKER)}.*\\n(?=[ \\t]*- id: "?${id}"?[ \\t]*$)`,
      "m",
    );
    const next = text.replace(marked, "");
    return next === text ? undefined : next;
  };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function isEmptyList(doc: Parameters<FleetEdit>[0]): boolean {
  const list = isMap(doc.contents) ? doc.contents.get("proxy_servers", true) : undefined;
  return isSeq(list) && list.items.length === 0;
}

/**
 * A flow list (`proxy_servers: []`) cannot hold the marker comments, so it is printed as a block
 * list first; undefined when it already is one.
 */
function blockList(doc: Parameters<FleetEdit>[0]): string | undefined {
  const list = isMap(doc.contents) ? doc.contents.get("proxy_servers", true) : undefined;
  if (!isSeq(list) || !list.flow) return undefined;
  list.flow = false;
  for (const item of list.items) if (isMap(item)) item.flow = false;
  return doc.toString({ lineWidth: 0, flowCollectionPadding: false });
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
    await Deno.writeTextFile(path, "# Upstream MCP servers (see README.md).\nproxy_servers:\n", {
      createNew: true,
    }).catch((e) => {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    });
  }
}
