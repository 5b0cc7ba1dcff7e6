/**
 * RAGPipeline: a documents directory (Markdown and text) split into passages and ranked with BM25.
 * Files are reindexed one at a time when they change (by mtime and size), so an edit to one file
 * never re-reads the corpus.
 * @module
 */
import { tokenize } from "../mcp/tool_search.ts";

/** One retrievable passage. */
export interface Passage {
  /** Path relative to the corpus directory. */
  source: string;
  /** Character offset of the passage in its file. */
  offset: number;
  /** The nearest heading above it, when there is one. */
  heading?: string;
  text: string;
}

/** A passage with its score. */
export interface PassageHit extends Passage {
  score: number;
}

interface IndexedPassage extends Passage {
  terms: Map<string, number>;
  length: number;
}

interface IndexedFile {
  stamp: string;
  passages: IndexedPassage[];
}

const DOCUMENT = /\.(md|markdown|txt)$/i;
const K1 = 1.2;
const B = 0.75;

/** Splits a document into passages: Markdown headings start sections, blank lines paragraphs. */
export function splitPassages(source: string, text: string): Passage[] {
  const out: Passage[] = [];
  let heading: string | undefined;
  // Paragraphs are runs of non-blank lines; a heading line is its own block and names what follows.
  const block = /[^\n]*\S[^\n]*(?:\n[^\n]*\S[^\n]*)*/g;
  for (const match of text.matchAll(block)) {
    const lines = match[0].split("\n");
    let offset = match.index;
    while (lines.length > 0 && /^#{1,6}\s/.test(lines[0]!)) {
      const line = lines.shift()!;
      heading = line.replace(/^#{1,6}\s+/, "").trim();
      offset += line.length + 1;
    }
    const body = lines.join("\n").trim();
    if (body === "") continue;
    out.push({ source, offset, ...(heading === undefined ? {} : { heading }), text: body });
  }
  return out;
}

/** A BM25 index over a documents directory. */
export class RAGPipeline {
  readonly dir: string;
  #files = new Map<string, IndexedFile>();
  #df = new Map<string, number>();
  #averageLength = 0;
  #count = 0;

  constructor(dir: string) {
    this.dir = dir.replace(/\/+$/, "");
  }

  /** Number of passages indexed. */
  get size(): number {
    return this.#count;
  }

  /** Rescans the directory, reindexing only added or changed files; returns what changed. */
  async refresh(): Promise<{ indexed: string[]; removed: string[] }> {
    const seen = new Set<string>();
    const indexed: string[] = [];
    for (const path of await this.#walk(this.dir)) {
      const rel = path.slice(this.dir.length + 1);
      seen.add(rel);
      const info = await Deno.stat(path);
      const stamp = `${info.mtime?.getTime() ?? 0}:${info.size}`;
      if (this.#files.get(rel)?.stamp === stamp) continue;
      const text = await Deno.readTextFile(path);
      const passages = splitPassages(rel, text).map((p) => {
        const tokens = tokenize(`${p.heading ?? ""} ${p.text}`);
        const terms = new Map<string, number>();
        for (const t of tokens) terms.set(t, (terms.get(t) ?? 0) + 1);
        return { ...p, terms, length: tokens.length };
      });
      this.#files.set(rel, { stamp, passages });
      indexed.push(rel);
    }
    const removed = [...this.#files.keys()].filter((k) => !seen.has(k));
    for (const rel of removed) this.#files.delete(rel);
    if (indexed.length > 0 || removed.length > 0) this.#statistics();
    return { indexed, removed };
  }

  /** The `k` best passages for a query, best first; none when nothing matches. */
  search(query: string, k = 5): PassageHit[] {
    const terms = [...new Set(tokenize(query))];
    const hits: PassageHit[] = [];
    for (const file of this.#files.values()) {
      for (const p of file.passages) {
        let score = 0;
        for (const term of terms) {
          const tf = p.terms.get(term);
          if (!tf) continue;
          const df = this.#df.get(term) ?? 0;
          const idf = Math.log(1 + (this.#count - df + 0.5) / (df + 0.5));
          score += idf * (tf * (K1 + 1)) /
            (tf + K1 * (1 - B + B * p.length / (this.#averageLength || 1)));
        }
        if (score > 0) {
          hits.push({
            source: p.source,
            offset: p.offset,
            ...(p.heading === undefined ? {} : { heading: p.heading }),
            text: p.text,
            score: Math.round(score * 1000) / 1000,
          });
        }
      }
    }
    return hits.sort((a, b) =>
      b.score - a.score || a.source.localeCompare(b.source) ||
      a.offset - b.offset
    ).slice(0, k);
  }

  #statistics(): void {
    this.#df.clear();
    let total = 0;
    this.#count = 0;
    for (const file of this.#files.values()) {
      for (const p of file.passages) {
        this.#count++;
        total += p.length;
        for (const term of p.terms.keys()) this.#df.set(term, (this.#df.get(term) ?? 0) + 1);
      }
    }
    this.#averageLength = this.#count ? total / this.#count : 0;
  }

  async #walk(dir: string): Promise<string[]> {
    const out: string[] = [];
    let entries: Deno.DirEntry[] = [];
    try {
      entries = await Array.fromAsync(Deno.readDir(dir));
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return out;
      throw error;
    }
    for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      if (entry.name.startsWith(".")) continue;
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) out.push(...await this.#walk(path));
      else if (entry.isFile && DOCUMENT.test(entry.name)) out.push(path);
    }
    return out;
  }
}
