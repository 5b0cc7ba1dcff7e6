/**
 * Field readers for definition files: each records a `file:line` problem instead of throwing, so
 * one pass reports every mistake in a file.
 * @module
 */
import {
  describe,
  type ProblemList,
  type YamlPath,
  type YamlSource,
} from "../config/yaml_source.ts";

/** Reads fields of one mapping in one file, recording problems as it goes. */
export class FieldReader {
  constructor(
    readonly source: YamlSource,
    readonly problems: ProblemList,
  ) {}

  /** Records every key of `map` that is not in `known`, with a "did you mean". */
  keys(map: Record<string, unknown>, at: YamlPath, known: readonly string[]): void {
    for (const key of Object.keys(map)) {
      if (!known.includes(key)) this.problems.unknownKey(this.source, [...at, key], known);
    }
  }

  /** A non-empty string; `fix` tells the reader what to write. */
  string(
    map: Record<string, unknown>,
    at: YamlPath,
    key: string,
    fix: string,
  ): string | undefined {
    const value = map[key];
    if (value === undefined) {
      this.problems.add(this.source, [...at, key], `is required: ${fix}`);
      return undefined;
    }
    if (typeof value !== "string" || value.trim() === "") {
      this.problems.add(
        this.source,
        [...at, key],
        `must be a non-empty string (${fix}), received ${describe(value)}`,
      );
      return undefined;
    }
    return value;
  }

  /** An optional non-empty string. */
  optionalString(map: Record<string, unknown>, at: YamlPath, key: string): string | undefined {
    if (map[key] === undefined) return undefined;
    return this.string(map, at, key, "or remove the field");
  }

  /** An optional list of strings; `[]` when absent. */
  stringList(map: Record<string, unknown>, at: YamlPath, key: string): string[] {
    const value = map[key];
    if (value === undefined) return [];
    if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) {
      this.problems.add(
        this.source,
        [...at, key],
        `must be a list of strings, received ${describe(value)}`,
      );
      return [];
    }
    return value as string[];
  }

  /** An optional whole number within bounds. */
  integer(
    map: Record<string, unknown>,
    at: YamlPath,
    key: string,
    bounds: { min: number; max: number; fallback: number },
  ): number {
    const value = map[key];
    if (value === undefined) return bounds.fallback;
    if (
      !Number.isInteger(value) || (value as number) < bounds.min || (value as number) > bounds.max
    ) {
      this.problems.add(
        this.source,
        [...at, key],
        `must be a whole number from ${bounds.min} to ${bounds.max}, received ${describe(value)}`,
      );
      return bounds.fallback;
    }
    return value as number;
  }
}

/** Ids name files and resource URIs: keep them URL- and path-safe. */
export const ID_PATTERN = /^[a-z0-9][a-z0-9_-]*$/;
