/**
 * The fault matrix behind sse inbound; see matrix.ts for the faults and their rules.
 * @module
 */
import { defineFaultMatrix } from "./matrix.ts";

defineFaultMatrix("sse");
