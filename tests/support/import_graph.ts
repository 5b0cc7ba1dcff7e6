/**
 * The source tree as the architecture tests see it: every source file under `core/`, `plugins/`,
 * `cli/` and `main.ts` (tests, fixtures and test data left out), its static imports and
 * re-exports (type-only ones included: a design dependency is a dependency), its line count and
 * the length of each of its functions. Read by scanning `import`/`export … from` statements, not
 * by a TypeScript parser, so it stays cheap and has no dependency.
 * @module
 */

/** One source file, with paths relative to the repository root. */
export interface SourceFile {
  /** E.g. `core/kernel.ts`. */
  path: string;
  /** Relative paths of the repository files it imports (bare and npm specifiers left out). */
  imports: string[];
  /** Lines in the file. */
  lines: number;
  /** Functions and methods with their length in lines. */
  functions: FunctionSpan[];
}

/** A function or method: where it starts and how many lines it spans. */
export interface FunctionSpan {
  name: string;
  /** 1-based line of its first line. */
  line: number;
  lines: number;
}

const SKIPPED_DIRS = new Set([
  "node_modules",
  ".git",
  "tests",
  "bench",
  "examples",
  "testdata",
  "fixtures",
]);
const IMPORT_RE =
  /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?["']([^"']+)["']/g;

async function walk(root: string, dir: string, out: string[]): Promise<void> {
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(`${root}/${dir}`));
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return;
    throw error;
  }
  entries.sort((a, b) => a.name.localeCompare(b.name));
  for (const entry of entries) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) {
      if (!SKIPPED_DIRS.has(entry.name)) await walk(root, path, out);
    } else if (/\.(ts|tsx|js|mjs)$/.test(entry.name) && !/_test\.(ts|tsx|js)$/.test(entry.name)) {
      out.push(path);
    }
  }
}

/** `spec` imported from `from`, as a path relative to the root; undefined for bare specifiers. */
function resolve(from: string, spec: string, known: ReadonlySet<string>): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  const parts = `${from.slice(0, from.lastIndexOf("/") + 1)}${spec}`.split("/");
  const out: string[] = [];
  for (const part of parts) {
    if (part === "..") out.pop();
    else if (part !== "." && part !== "") out.push(part);
  }
  const path = out.join("/");
  return [path, `${path}.ts`, `${path}/mod.ts`, `${path}/index.ts`].find((c) => known.has(c)) ??
    path;
}

/** Drops comments so a commented-out import is not counted (roughly: strings are not parsed). */
export function withoutComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

const FUNCTION_START = [
  // function declarations: `export async function* name(`
  /^(\s*)(?:export\s+)?(?:default\s+)?(?:async\s+)?function\*?\s+([\w$]+)\s*[<(]/,
  // class members: `  async #name(`, `  static get name(`, `  override name<T>(`
  /^(\s+)(?:(?:public|private|protected|static|override|async|get|set)\s+)*\*?(#?[\w$]+)\s*(?:<[^>]*>)?\([^;]*$/,
  // arrow functions and function expressions bound to a name: `const name = async (` … `=> {`
  /^(\s*)(?:export\s+)?(?:const|let)\s+([\w$]+)\s*(?::[^=]+)?=\s*(?:async\s+)?(?:function\b|\(|[\w$]+\s*=>)/,
];
const KEYWORDS = new Set(["if", "for", "while", "switch", "catch", "return", "await", "new"]);

/**
 * Function lengths, read from the indentation `deno fmt` guarantees: a function starting at
 * indent N ends at the first later line at indent N that begins with `}`.
 */
export function functionSpans(text: string): FunctionSpan[] {
  const lines = text.split("\n");
  const spans: FunctionSpan[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    for (const pattern of FUNCTION_START) {
      const match = pattern.exec(line);
      if (!match || KEYWORDS.has(match[2]!)) continue;
      const indent = match[1]!.length;
      // A one-line function or a declaration without a body has nothing to measure.
      if (!/[{(,]\s*$/.test(line)) break;
      for (let j = i + 1; j < lines.length; j++) {
        const next = lines[j]!;
        const nextIndent = next.length - next.trimStart().length;
        if (next.trim() === "") continue;
        if (nextIndent < indent) break;
        if (nextIndent === indent && next.trimStart().startsWith("}")) {
          spans.push({ name: match[2]!, line: i + 1, lines: j - i + 1 });
          break;
        }
      }
      break;
    }
  }
  return spans;
}

/** Every source file under `root`, with its imports, size and functions. */
export async function readSourceTree(root: string): Promise<SourceFile[]> {
  const paths: string[] = [];
  for (const top of ["core", "plugins", "cli", "tools"]) await walk(root, top, paths);
  try {
    await Deno.stat(`${root}/main.ts`);
    paths.push("main.ts");
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const known = new Set(paths);
  return await Promise.all(paths.map(async (path) => {
    const text = await Deno.readTextFile(`${root}/${path}`);
    const imports = new Set<string>();
    for (const match of withoutComments(text).matchAll(IMPORT_RE)) {
      const target = resolve(path, match[1]!, known);
      if (target !== undefined) imports.add(target);
    }
    return {
      path,
      imports: [...imports].sort(),
      lines: text.split("\n").length,
      functions: path.endsWith(".js") ? [] : functionSpans(text),
    };
  }));
}

/** The import cycles: strongly connected components of more than one file (Tarjan). */
export function importCycles(files: readonly SourceFile[]): string[][] {
  const graph = new Map(files.map((f) => [f.path, f.imports]));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  let counter = 0;
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)!.includes(v)) cycles.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** Whether `path` is the plugin facade, the only part of core a plugin may import. */
export function isPluginFacade(path: string): boolean {
  return path === "core/plugin_api/mod.ts" || path.startsWith("core/plugin_api/");
}

/**
 * The room a file belongs to: its directory under `core/` (`core/auth`; files deeper down belong
 * to that room unless a deeper directory is listed in `nested`, as `core/config/settings`), the
 * file itself at the `core/` root (`core/kernel.ts`) and the repository root (`main.ts`), else its
 * top folder (`cli`, `plugins`).
 */
export function roomOf(path: string, nested: readonly string[]): string {
  const parts = path.split("/");
  if (parts.length === 1 || (parts[0] === "core" && parts.length === 2)) return path;
  if (parts[0] !== "core") return parts[0]!;
  const dir = parts.slice(0, -1).join("/");
  return nested.find((n) => dir === n || dir.startsWith(`${n}/`)) ?? `${parts[0]}/${parts[1]}`;
}

/** Each room's files' imports of other rooms: room → the rooms it imports (itself left out). */
export function roomImports(
  files: readonly SourceFile[],
  nested: readonly string[],
): Map<string, Set<string>> {
  const edges = new Map<string, Set<string>>();
  for (const file of files) {
    const room = roomOf(file.path, nested);
    const imported = edges.get(room) ?? new Set<string>();
    for (const path of file.imports) {
      const target = roomOf(path, nested);
      if (target !== room) imported.add(target);
    }
    edges.set(room, imported);
  }
  return edges;
}
