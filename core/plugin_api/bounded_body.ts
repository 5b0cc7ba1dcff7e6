/**
 * The plugin API's bounded reading of bytes, importable alone (it imports only what it serves), so
 * a worker relay can bound what an upstream sends without loading the facade.
 * @module
 */
export { readBoundedBody } from "../support/bounded_body.ts";
export { concatBytes } from "../support/concat_bytes.ts";
