/**
 * What a scanner rule sees and reports: the normalized fleet (servers, their entities and every
 * string a model reads, with how it was decoded) and the findings a rule returns. Part of the
 * plugin API (re-exported by mod.ts); a rule plugin's manifest lives there.
 * @module
 */

/** How bad a scanner finding is, from least to most severe. */
export type ScanSeverity = "info" | "low" | "medium" | "high" | "critical";

/** What a scanned entity is: a server's instructions, a tool, a prompt or a resource (template). */
export type ScanEntityKind = "instructions" | "tool" | "prompt" | "resource" | "resource-template";

/** The encodings the scanner reads hidden text out of (ROT13 and reversal: sentence by sentence). */
export type HiddenBy =
  | "unicode-tags"
  | "base64"
  | "hex"
  | "selectors"
  | "entities"
  | "percent"
  | "rot13"
  | "reversed";

/** One string a model sees, located by a JSON Pointer into the descriptor snapshot. */
export interface ScanText {
  /** JSON Pointer, e.g. `/servers/0/tools/2/inputSchema/properties/path/description`. */
  pointer: string;
  /** `name` and `title` fields hold identifiers; the rest is prose. */
  field: "name" | "title" | "description" | "instructions" | "param-name" | "text";
  text: string;
  /** Set when the scanner decoded (or NFKC-normalized) this text out of another one. */
  decodedFrom?: HiddenBy | "nfkc";
  /** Set when the field was longer than the scan limit: its full length (only the head is here). */
  truncatedFrom?: number;
}

/** One tool, prompt, resource, template or instructions block of one server. */
export interface ScanEntity {
  server: string;
  kind: ScanEntityKind;
  /** The entity's name (a resource's name, or its URI when it has none). */
  name: string;
  /** JSON Pointer of the entity in the snapshot. */
  pointer: string;
  /** Every model-visible string of the entity, decoded payloads included. */
  texts: ScanText[];
  /** The descriptor as the server sent it (a tool's `inputSchema`, `annotations`, …). */
  raw: Record<string, unknown>;
}

/** One server as a scanner rule sees it. */
export interface ScanServer {
  id: string;
  entities: ScanEntity[];
}

/** The normalized fleet every rule checks at once, so rules can compare servers. */
export interface ScanModel {
  servers: ScanServer[];
}

/** What a rule reports; the scanner adds the rule id and fills defaults. */
export interface RuleFinding {
  entity: ScanEntity;
  /** Overrides the rule's default severity for this finding. */
  severity?: ScanSeverity;
  /** Where exactly; defaults to the entity's pointer. */
  pointer?: string;
  message: string;
  /** The offending excerpt, short. */
  evidence?: string;
}

/** One scanner rule: a stable id, a default severity, and a check over the whole fleet. */
export interface ScannerRule {
  /** Stable id, `[a-z0-9-]+`; SARIF rule ids and suppressions use it. */
  id: string;
  severity: ScanSeverity;
  /** One line: what the rule looks for. */
  description: string;
  check(model: ScanModel): RuleFinding[];
  /**
   * For rules whose answers arrive later (a model's opinion): the scanner calls this once with a
   * function the rule calls when it has new answers, so the fleet is rescanned. Such rules run in
   * the gateway's own thread (their state lives there), never in the scan worker.
   */
  onChange?(rescan: () => void): void;
}
