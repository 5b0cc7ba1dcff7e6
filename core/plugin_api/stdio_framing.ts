/**
 * The plugin API's lean part for upstream workers: reading a child's pipes in bounded chunks,
 * writing whole lines, and cleaning text for a log. It imports nothing else, so a worker relay
 * that loads only this stays small (no SDK, no zod).
 * @module
 */
export { ChunkReader } from "../support/chunk_reader.ts";
export { LineWriter } from "../support/line_writer.ts";
export { plainText } from "../support/control_characters.ts";
