/**
 * The plugin API's lean part for upstream workers: reading a child's pipes in bounded chunks,
 * writing whole lines, and cleaning text for a log. It imports nothing else, so a worker relay
 * that loads only this stays small (no SDK, no zod).
 * @module
 */
export { ChunkReader } from "../chunk_reader.ts";
export { LineWriter } from "../line_writer.ts";
export { plainText } from "../control_characters.ts";
