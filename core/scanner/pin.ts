/**
 * Pinning: a lock file with the SHA-256 of each entity's model-visible strings and, separately,
 * of its structure (canonical JSON), so a later scan can tell a reworded description from a
 * changed schema and flag a "rug pull": a description that gains imperative text or a new sink
 * after it was approved.
 * @module
 */
import { createHash } from "node:crypto";
import type { ScanEntity, ScannerRule } from "../plugin_api/mod.ts";
import { canonicalJson } from "../governance/canonical_json.ts";
import type { ServerDescriptor } from "./descriptor.ts";
import { type Finding, severityRank } from "./finding.ts";
import { buildScanModel } from "./normalize.ts";
import { scanServers } from "./scan.ts";

/** One pinned entity. */
export interface PinnedEntity {
  /** SHA-256 of the canonical JSON of its model-visible strings (by relative pointer). */
  text: string;
  /** SHA-256 of the canonical JSON of the descriptor without its prose. */
  structure: string;
  /** The strings themselves, so a change can be explained. */
  texts: Record<string, string>;
}

/** A lock file: `servers[id]["tool/name"]`. */
export interface PinFile {
  version: 1;
  servers: Record<string, Record<string, PinnedEntity>>;
}

const PROSE = new Set(["description", "title", "instructions", "text"]);

function sha256(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex");
}

function withoutProse(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutProse);
  if (!value || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined || (PROSE.has(k) && typeof v === "string")) continue;
    out[k] = withoutProse(v);
  }
  return out;
}

function pinEntity(entity: ScanEntity): PinnedEntity {
  const texts: Record<string, string> = {};
  for (const t of entity.texts) {
    if (t.decodedFrom) continue;
    texts[t.pointer.slice(entity.pointer.length) || "/"] = t.text;
  }
  return { text: sha256(texts), structure: sha256(withoutProse(entity.raw)), texts };
}

const key = (entity: ScanEntity) => `${entity.kind}/${entity.name}`;

/** The lock of a fleet. */
export function createPin(descriptors: readonly ServerDescriptor[]): PinFile {
  const pin: PinFile = { version: 1, servers: {} };
  for (const server of buildScanModel(descriptors).servers) {
    const entities: Record<string, PinnedEntity> = {};
    for (const entity of server.entities) entities[key(entity)] = pinEntity(entity);
    pin.servers[server.id] = entities;
  }
  return pin;
}

/** Validates a parsed lock file. */
export function parsePin(value: unknown): PinFile {
  const v = value as PinFile | null;
  if (!v || v.version !== 1 || !v.servers || typeof v.servers !== "object") {
    throw new Error('not an agent33 pin file (expected { "version": 1, "servers": { … } })');
  }
  return v;
}

// Text that tells the model to do something, or names a place data can go.
const IMPERATIVE =
  /\b(?:always|never|must|do not|don't|ignore|before|instead|make sure|you should|required|important|send|forward|pass|include|read|change)\b|<\/?[a-z]+>|https?:\/\/|@[\w-]+\.[a-z]{2,}|\+\d{7,}|\b(?:\d{1,3}\.){3}\d{1,3}\b/i;

/** Findings for changes since the pin: rug pulls (critical), cosmetic edits, added/removed. */
export function diffPin(
  pin: PinFile,
  descriptors: readonly ServerDescriptor[],
  rules: readonly ScannerRule[],
): Finding[] {
  const findings: Finding[] = [];
  const model = buildScanModel(descriptors);
  const finding = (
    rule: string,
    severity: Finding["severity"],
    server: string,
    entity: { kind: ScanEntity["kind"]; name: string },
    pointer: string,
    message: string,
    evidence = "",
  ): Finding => ({
    rule,
    severity,
    server,
    entity,
    pointer,
    message,
    evidence,
    fingerprint: createHash("sha256").update(
      JSON.stringify([rule, server, entity.kind, entity.name, message]),
    ).digest("hex"),
  });
  for (const server of model.servers) {
    const pinned = pin.servers[server.id];
    if (!pinned) {
      findings.push(
        finding(
          "pin-new-server",
          "medium",
          server.id,
          { kind: "instructions", name: server.id },
          `/servers/${model.servers.indexOf(server)}`,
          "server is not in the pin file",
        ),
      );
      continue;
    }
    const seen = new Set<string>();
    for (const entity of server.entities) {
      const k = key(entity);
      seen.add(k);
      const before = pinned[k];
      const ref = { kind: entity.kind, name: entity.name };
      if (!before) {
        findings.push(
          finding(
            "pin-added",
            "medium",
            server.id,
            ref,
            entity.pointer,
            `${entity.kind} "${entity.name}" was added since the pin`,
          ),
        );
        continue;
      }
      const now = pinEntity(entity);
      if (now.text !== before.text) {
        const added = addedWords(before.texts, now.texts);
        const imperative = IMPERATIVE.exec(added);
        const risky = riskyFindings(server.id, entity, rules);
        if (imperative || risky) {
          findings.push(finding(
            "rug-pull",
            "critical",
            server.id,
            ref,
            entity.pointer,
            `model-visible text changed since the pin and now ${
              risky ? `triggers ${risky}` : `adds "${imperative![0]}"`
            } (rug pull)`,
            added.slice(0, 200),
          ));
        } else {
          findings.push(
            finding(
              "pin-text-changed",
              "low",
              server.id,
              ref,
              entity.pointer,
              "model-visible text changed cosmetically since the pin",
              added.slice(0, 200),
            ),
          );
        }
      }
      if (now.structure !== before.structure) {
        findings.push(
          finding(
            "pin-structure-changed",
            "medium",
            server.id,
            ref,
            entity.pointer,
            "schema or annotations changed since the pin",
          ),
        );
      }
    }
    for (const k of Object.keys(pinned)) {
      if (seen.has(k)) continue;
      const [kind, ...name] = k.split("/");
      findings.push(
        finding(
          "pin-removed",
          "low",
          server.id,
          { kind: kind as ScanEntity["kind"], name: name.join("/") },
          `/servers/${model.servers.indexOf(server)}`,
          `${kind} "${name.join("/")}" was removed since the pin`,
        ),
      );
    }
  }
  return findings;
}

function addedWords(before: Record<string, string>, after: Record<string, string>): string {
  const old = new Map<string, number>();
  for (const w of Object.values(before).join(" ").split(/\s+/)) old.set(w, (old.get(w) ?? 0) + 1);
  const added: string[] = [];
  for (const w of Object.values(after).join(" ").split(/\s+/)) {
    const n = old.get(w) ?? 0;
    if (n > 0) old.set(w, n - 1);
    else if (w) added.push(w);
  }
  return added.join(" ");
}

/** Rule ids with medium-or-worse findings on the entity as it is now, or undefined. */
function riskyFindings(
  server: string,
  entity: ScanEntity,
  rules: readonly ScannerRule[],
): string | undefined {
  const descriptor: ServerDescriptor = { id: server, tools: [] };
  if (entity.kind === "instructions") descriptor.instructions = String(entity.raw.instructions);
  else if (entity.kind === "tool") descriptor.tools = [entity.raw];
  else if (entity.kind === "prompt") descriptor.prompts = [entity.raw];
  else if (entity.kind === "resource") descriptor.resources = [entity.raw];
  else descriptor.resourceTemplates = [entity.raw];
  // Medium or worse only: schema hygiene (low) never makes a rug pull.
  const ids = [
    ...new Set(
      scanServers([descriptor], rules).findings
        .filter((f) => severityRank(f.severity) >= severityRank("medium"))
        .map((f) => f.rule),
    ),
  ];
  return ids.length > 0 ? ids.join(", ") : undefined;
}
