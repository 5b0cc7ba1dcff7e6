/**
 * ToolRegistry: the native tools, each with its argument validator compiled once at registration.
 * @module
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { NativeTool, ToolRegistration } from "../plugin_api/mod.ts";
import { compileSchema } from "../governance/schema_validator.ts";

/** Tool names per the MCP spec: 1–128 of letters, digits, `_`, `-`, `.`. */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

interface Entry {
  tool: NativeTool;
}

/** The native tools. Names are unique; registration returns an unregister function. */
export class ToolRegistry implements ToolRegistration {
  #entries = new Map<string, Entry>();
  #listeners = new Set<() => void>();

  /** Adds a tool; throws TypeError for a bad name or schema, and on a duplicate name. */
  register(tool: NativeTool): () => void {
    if (!TOOL_NAME.test(tool.name)) {
      throw new TypeError(
        `Cannot register tool "${tool.name}": names are 1–128 letters, digits, "_", "-" or "."`,
      );
    }
    if (this.#entries.has(tool.name)) {
      throw new TypeError(`Cannot register tool "${tool.name}": a tool with that name exists`);
    }
    try {
      // Compiled now so a bad schema fails at registration; calls are validated by governance.
      compileSchema(tool.inputSchema as Record<string, unknown>);
    } catch (error) {
      throw new TypeError(
        `Cannot register tool "${tool.name}": its inputSchema is not valid JSON Schema (${
          (error as Error).message
        })`,
      );
    }
    const entry = { tool };
    this.#entries.set(tool.name, entry);
    this.#changed();
    return () => {
      if (this.#entries.get(tool.name) === entry) {
        this.#entries.delete(tool.name);
        this.#changed();
      }
    };
  }

  /** Whether a native tool has this name (proxied tools never shadow one). */
  has(name: string): boolean {
    return this.#entries.has(name);
  }

  /** The tool, or undefined. */
  get(name: string): NativeTool | undefined {
    return this.#entries.get(name)?.tool;
  }

  /** Descriptors of every tool, in registration order, without handlers. */
  list(): Tool[] {
    return [...this.#entries.values()].map(({ tool }) => {
      const { handler: _handler, ...descriptor } = tool;
      return descriptor;
    });
  }

  /** Number of tools. */
  get size(): number {
    return this.#entries.size;
  }

  /** Calls `listener` whenever the set of tools changes. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  #changed(): void {
    for (const listener of [...this.#listeners]) listener();
  }
}
