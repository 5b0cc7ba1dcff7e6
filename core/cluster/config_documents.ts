/**
 * The documents of the `agent33_config` bucket (cluster mode): the fleet YAML and the policy
 * files, each one value with the bucket's revision. The YAML is stored as written (comments kept,
 * `${VAR}` unresolved: each replica interpolates its own environment), wrapped in a small JSON
 * record saying who wrote it and when. What is read back is untrusted: its shape is checked here.
 * @module
 */
import { z } from "zod";
import { decodeJson, encodeJson, type SharedEntry } from "../bus/shared_state.ts";
import type { PolicyFile } from "../governance/policy_loader.ts";

/** The bucket holding the cluster's fleet and policies. */
export const CONFIG_BUCKET = "agent33_config";
/** The key of the fleet document. */
export const FLEET_KEY = "fleet";
/** The key of the policy documents. */
export const POLICIES_KEY = "policies";
/** The largest document the bucket takes: NATS's default max_payload (thousands of entries fit). */
export const MAX_DOCUMENT_BYTES = 1024 * 1024;
/** At most this many policy files. */
const MAX_POLICY_FILES = 256;

/** A policy file's name in the bucket: a plain file name, never a path. */
const POLICY_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}\.ya?ml$/;

const written = {
  /** The replica that wrote it. */
  by: z.string().max(128).optional(),
  /** When, in ms since the epoch. */
  at: z.number().optional(),
};

const fleetDocument = z.object({ text: z.string(), ...written });
const policyDocument = z.object({
  files: z.array(z.object({ name: z.string().regex(POLICY_NAME), text: z.string() }))
    .max(MAX_POLICY_FILES),
  ...written,
});

/** The fleet as stored. */
export type FleetDocument = z.infer<typeof fleetDocument>;
/** The policy files as stored. */
export type PolicyDocument = z.infer<typeof policyDocument>;

/** A document read back, with its revision. */
export interface Revisioned<T> {
  document: T;
  revision: number;
}

/** The fleet document of an entry; throws naming the problem when the value is not one. */
export function decodeFleetDocument(entry: SharedEntry): Revisioned<FleetDocument> {
  return { document: decode(entry, fleetDocument), revision: entry.revision };
}

/** The policy document of an entry; throws naming the problem when the value is not one. */
export function decodePolicyDocument(entry: SharedEntry): Revisioned<PolicyDocument> {
  return { document: decode(entry, policyDocument), revision: entry.revision };
}

/** A document's bytes. */
export function encodeDocument(document: FleetDocument | PolicyDocument): Uint8Array {
  return encodeJson(document);
}

/** The policy files of a document, named as the bucket knows them. */
export function policyFiles(document: PolicyDocument): PolicyFile[] {
  return document.files.map((file) => ({ path: file.name, text: file.text }));
}

/**
 * A policy document of files read from disk (their base names); throws when one cannot be
 * shared, so a seed never writes what the other replicas would refuse.
 */
export function policyDocumentOf(files: readonly PolicyFile[], by: string, at: number) {
  const document: PolicyDocument = {
    files: files.map((file) => ({
      name: file.path.slice(file.path.lastIndexOf("/") + 1),
      text: file.text,
    })),
    by,
    at,
  };
  const checked = policyDocument.safeParse(document);
  if (!checked.success) {
    throw new Error(
      `the policy files cannot be shared: ${checked.error.issues[0]?.message ?? "invalid"} ` +
        `(names must be plain *.yaml file names, at most ${MAX_POLICY_FILES} files)`,
    );
  }
  return document;
}

/** Where a revision of a document came from, in messages and events. */
export function documentOrigin(key: string, revision: number): string {
  return `${CONFIG_BUCKET}/${key}@${revision}`;
}

function decode<T>(entry: SharedEntry, schema: z.ZodType<T>): T {
  let value: unknown;
  try {
    value = decodeJson(entry.value);
  } catch {
    throw new Error(`${documentOrigin(entry.key, entry.revision)} is not JSON`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(
      `${documentOrigin(entry.key, entry.revision)} is not a ${entry.key} document: ` +
        `${issue?.path.join(".") || "value"}: ${issue?.message ?? "invalid"}`,
    );
  }
  return parsed.data;
}
