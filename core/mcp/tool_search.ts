/**
 * ToolSearch: BM25 ranking of tools by name, description and parameter names, for progressive
 * tool discovery. Names are split into words (`github__create_issue` → github, create, issue;
 * `getWeather` → get, weather) and weigh more than descriptions.
 * @module
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";

/** One ranked result. */
export interface ScoredTool {
  tool: Tool;
  score: number;
}

const K1 = 1.2;
const B = 0.75;
/** Field weights: a word in the name says more than one in a long description. */
const NAME_WEIGHT = 3;
const PARAM_WEIGHT = 2;
const STOP = new Set([
  "a",
  "an",
  "the",
  "of",
  "to",
  "in",
  "on",
  "for",
  "and",
  "or",
  "with",
  "by",
  "from",
  "is",
  "it",
  "this",
  "that",
  "be",
  "as",
  "at",
  "i",
  "me",
  "my",
  "want",
  "need",
  "please",
  "some",
  "can",
  "you",
]);

/** Lower-case word tokens, with camelCase and snake/kebab names split. */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((t) => t.length > 1 && !STOP.has(t))
    .map(stem);
}

/** A light suffix stripper so "issues"/"issue" and "listing"/"list" meet. */
function stem(word: string): string {
  if (word.length > 4 && word.endsWith("ies")) return word.slice(0, -3) + "y";
  if (word.length > 5 && word.endsWith("ing")) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith("ed")) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith("s") && !word.endsWith("ss")) return word.slice(0, -1);
  return word;
}

interface Doc {
  tool: Tool;
  terms: Map<string, number>;
  length: number;
}

/** A BM25 index over a fixed list of tools. */
export class ToolSearchIndex {
  #docs: Doc[];
  #df = new Map<string, number>();
  #avgLength: number;

  constructor(tools: readonly Tool[]) {
    this.#docs = tools.map((tool) => {
      const terms = new Map<string, number>();
      const add = (words: string[], weight: number) => {
        for (const w of words) terms.set(w, (terms.get(w) ?? 0) + weight);
      };
      add(tokenize(tool.name), NAME_WEIGHT);
      add(tokenize(tool.title ?? ""), NAME_WEIGHT);
      add(tokenize(tool.description ?? ""), 1);
      const properties =
        (tool.inputSchema as { properties?: Record<string, { description?: string }> })
          .properties ?? {};
      for (const [param, schema] of Object.entries(properties)) {
        add(tokenize(param), PARAM_WEIGHT);
        add(tokenize(schema?.description ?? ""), 0.5);
      }
      let length = 0;
      for (const count of terms.values()) length += count;
      return { tool, terms, length };
    });
    for (const doc of this.#docs) {
      for (const term of doc.terms.keys()) this.#df.set(term, (this.#df.get(term) ?? 0) + 1);
    }
    this.#avgLength = this.#docs.reduce((n, d) => n + d.length, 0) / Math.max(1, this.#docs.length);
  }

  /** The `k` best matches of `query`, best first; tools matching no query word are left out. */
  search(query: string, k: number): ScoredTool[] {
    const words = [...new Set(tokenize(query))];
    const n = this.#docs.length;
    const scored: ScoredTool[] = [];
    for (const doc of this.#docs) {
      let score = 0;
      for (const word of words) {
        const tf = doc.terms.get(word);
        if (!tf) continue;
        const df = this.#df.get(word) ?? 0;
        const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
        score += idf * (tf * (K1 + 1)) / (tf + K1 * (1 - B + B * doc.length / this.#avgLength));
      }
      if (score > 0) scored.push({ tool: doc.tool, score });
    }
    return scored.sort((a, b) => b.score - a.score || a.tool.name.localeCompare(b.tool.name))
      .slice(0, k);
  }
}
