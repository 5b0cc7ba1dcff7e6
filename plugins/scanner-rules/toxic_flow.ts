/**
 * Rule toxic-flow: a fleet in which one tool reads untrusted content, another reads private data
 * and a third publishes, so injected text can carry private data out (the "lethal trifecta").
 * Each tool may be harmless; the combination is what a model can be talked into.
 * @module
 */
import type { RuleFinding, ScanEntity, ScannerRule } from "../../core/plugin_api/mod.ts";
import { allEntities, identifierWords } from "./text.ts";

const SOURCE_WORDS = new Set([
  "fetch",
  "browse",
  "scrape",
  "crawl",
  "web",
  "url",
  "http",
  "comments",
  "comment",
  "inbox",
  "rss",
  "news",
  "issues",
  "webpage",
  "website",
]);
const PRIVATE_WORDS = new Set([
  "secret",
  "secrets",
  "key",
  "password",
  "credential",
  "credentials",
  "env",
  "database",
  "db",
  "sql",
  "file",
  "files",
  "emails",
  "messages",
  "chats",
  "contacts",
  "calendar",
  "drive",
]);
const SINK_WORDS = new Set([
  "send",
  "post",
  "publish",
  "upload",
  "tweet",
  "share",
  "webhook",
  "email",
  "reply",
  "push",
]);
const READ_VERBS = new Set(["get", "read", "list", "search", "query", "open", "retrieve", "load"]);

function words(entity: ScanEntity): string[] {
  return identifierWords(entity.name);
}

function isSource(entity: ScanEntity): boolean {
  const description = String(entity.raw.description ?? "");
  return words(entity).some((w) => SOURCE_WORDS.has(w)) ||
    /\bfrom the (?:web|internet|website)\b|\buntrusted\b|\buser[- ]generated\b/i.test(description);
}

function isPrivate(entity: ScanEntity): boolean {
  const w = words(entity);
  return w.some((x) => PRIVATE_WORDS.has(x)) &&
    (w.some((x) => READ_VERBS.has(x)) || w.length === 1);
}

function isSink(entity: ScanEntity): boolean {
  const annotations = entity.raw.annotations as { readOnlyHint?: unknown } | undefined;
  if (annotations?.readOnlyHint === true) return false;
  return SINK_WORDS.has(words(entity)[0] ?? "");
}

/** Untrusted source → private data → public sink across the fleet. */
export const toxicFlow: ScannerRule = {
  id: "toxic-flow",
  severity: "medium",
  description:
    "Untrusted-content source, private-data reader and public sink reachable in one fleet",
  check(model) {
    const tools = allEntities(model).filter((e) => e.kind === "tool");
    const sources = tools.filter(isSource);
    const privates = tools.filter(isPrivate);
    const findings: RuleFinding[] = [];
    for (const sink of tools.filter(isSink)) {
      const source = sources.find((s) => s !== sink);
      const secret = privates.find((p) => p !== sink && p !== source);
      if (!source || !secret) continue;
      const at = (e: ScanEntity) => `${e.server}/${e.name}`;
      findings.push({
        entity: sink,
        message: `toxic flow: untrusted ${at(source)} → private ${at(secret)} → sink ${at(sink)}`,
        evidence: `${source.name} → ${secret.name} → ${sink.name}`,
      });
    }
    return findings;
  },
};
