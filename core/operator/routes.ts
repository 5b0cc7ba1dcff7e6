/**
 * The operator surface's HTTP routes, mounted by the kernel on its listener (behind the Host check
 * and authentication). Each family lives in its own file; this list is the one place they join.
 * @module
 */
import type { Kernel } from "../kernel.ts";
import type { HttpRoute } from "../plugin_api.ts";

/** Every operator route family, given the running kernel. */
export function operatorRoutes(_kernel: Kernel): HttpRoute[] {
  return [];
}
