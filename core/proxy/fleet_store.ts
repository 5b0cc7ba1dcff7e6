/**
 * Where the fleet's edits are kept: the fleet file for one process, or, in cluster mode, the
 * shared `agent33_config` bucket every replica applies from (core/cluster/shared_config.ts). The
 * admin API and sync write through this, so they need not know which.
 * @module
 */
import {
  editFleetFile,
  type FleetEdit,
  type FleetEditOptions,
  type FleetEditResult,
} from "./fleet_writer.ts";

/** An edit's options: the file writer's, plus the revision the caller read (cluster mode). */
export interface FleetStoreEditOptions<V, R> extends FleetEditOptions<V, R> {
  /**
   * The revision the caller's edit is based on (an `If-Match`): when the shared fleet has moved
   * on, the edit is refused with `revision_conflict`. Without it the edit applies to the current
   * revision. Only a revisioned store honours it (the admin routes refuse an If-Match otherwise).
   */
  revision?: number;
}

/** What an edit did, with the revision it wrote (cluster mode). */
export interface FleetStoreResult<V, R> extends FleetEditResult<V, R> {
  /** The revision now current (cluster mode; undefined for the file). */
  revision?: number;
}

/** The one place fleet edits are written. */
export interface FleetStore {
  /** Names it in messages: the file's path, or the shared bucket. */
  readonly where: string;
  /** The file's path, for a file store. */
  readonly path?: string;
  /** Whether edits carry revisions (compare-and-set): the shared bucket's. */
  readonly revisioned: boolean;
  /** The current revision, once known (cluster mode); undefined for the file. */
  revision(): number | undefined;
  /** The current text ("" when there is none yet). */
  read(): Promise<string>;
  /** Applies `edit` to the current text, validated first; refusals change nothing. */
  edit<V, R = never>(
    edit: FleetEdit,
    options: FleetStoreEditOptions<V, R>,
  ): Promise<FleetStoreResult<V, R>>;
}

/** The fleet file as a store (the single-process default): edits rewrite the file atomically. */
export function fileFleetStore(path: string): FleetStore {
  return {
    where: path,
    path,
    revisioned: false,
    revision: () => undefined,
    read: () =>
      Deno.readTextFile(path).catch((error) => {
        if (error instanceof Deno.errors.NotFound) return "";
        throw error;
      }),
    edit: (edit, options) => editFleetFile(path, edit, options),
  };
}
