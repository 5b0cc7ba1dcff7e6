/**
 * The environment variables of governance, the scanner, audit and logs: each declared once, with its
 * parser, default and meaning (core/config/settings/settings.ts joins the groups; docs are generated).
 * @module
 */
import { bool, int, oneOf, setting, text } from "./setting.ts";

/** The variables of governance, the scanner, audit and logs. */
export const GOVERNANCE_SETTINGS = {
  MCP_POLICY_PATH: setting({
    group: "governance",
    schema: text,
    default: "policies",
    defaultNote: "(`--demo`: the repository's `policies/`)",
    meaning: "Governance policy file or directory",
  }),
  MCP_APPROVAL_SECRET: setting({
    group: "governance",
    schema: text.refine((v) => v === undefined || v.length >= 32, {
      message:
        "MCP_APPROVAL_SECRET must be at least 32 characters; generate one with: openssl rand -hex 32",
    }),
    shownDefault: "random per process",
    meaning: "HMAC key of approval tokens (≥ 32 characters); the same on every replica",
  }),
  MCP_APPROVAL_TTL: setting({
    group: "governance",
    schema: int("MCP_APPROVAL_TTL", 10, 86_400),
    default: 600,
    meaning: "Seconds an approval request and its token stay valid",
  }),
  MCP_MAX_PENDING_APPROVALS_PER_TENANT: setting({
    group: "governance",
    schema: int("MCP_MAX_PENDING_APPROVALS_PER_TENANT", 1, 10_000),
    default: 100,
    meaning:
      "Approval requests one tenant may have pending at once (10,000 in total); past it `approval_queue_full`",
  }),
  MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL: setting({
    group: "governance",
    schema: int("MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL", 1, 10_000),
    default: 20,
    meaning:
      "Approval requests one caller (API key, token subject) may have pending at once, at most the tenant's; past it `approval_queue_full`, so one caller cannot fill its tenant's share",
  }),
  MCP_MAX_SCHEMA_WORK: setting({
    group: "governance",
    schema: int("MCP_MAX_SCHEMA_WORK", 10_000, 1_000_000_000),
    default: 10_000_000,
    meaning:
      "Most work checking a call's arguments against one schema may take (units of ~10 ns, so the default is ~0.1 s of the thread every session shares); past it `invalid_arguments` unchecked",
  }),
  MCP_MAX_SCHEMA_CODE_PER_UPSTREAM: setting({
    group: "governance",
    schema: int("MCP_MAX_SCHEMA_CODE_PER_UPSTREAM", 65_536, 4 * 1024 * 1024 * 1024),
    default: 16 * 1024 * 1024,
    meaning:
      "Bytes of validation code the gateway compiles for one upstream's schemas over its life (V8 keeps each compiled function's source: ~2 bytes of heap a byte); past it that upstream's new schemas are not compiled and their calls refused `invalid_arguments`",
  }),
  MCP_APPROVAL_IN_BAND: setting({
    group: "governance",
    schema: bool("MCP_APPROVAL_IN_BAND"),
    default: true,
    meaning:
      "In-band approval through `elicitation/create`: on for stdio, over HTTP only for tenants whose policy says `approval: in_band`; `false` turns it off on every transport",
  }),
  MCP_APPROVALS_PATH: setting({
    group: "governance",
    schema: text,
    shownDefault: "`<fleet file>.approvals.json`",
    meaning:
      "Approvals and used token nonces kept across restarts (`--demo`: `<MCP_DATA_DIR>/approvals.json`; memory only without a fleet file, or with `off`)",
  }),
  MCP_AUDIT_LOG: setting({
    group: "governance",
    schema: text,
    shownDefault: "none (bus events only)",
    meaning: "File of JSON audit lines, one per decision (`--demo`: `<MCP_DATA_DIR>/audit.jsonl`)",
  }),
  MCP_AUDIT_MAX_BYTES: setting({
    group: "governance",
    schema: int("MCP_AUDIT_MAX_BYTES", 1024, 1024 * 1024 * 1024),
    default: 10 * 1024 * 1024,
    meaning: "Audit file size before rotation (5 files kept)",
  }),
  MCP_AUDIT_INCLUDE_ARGUMENTS: setting({
    group: "governance",
    schema: bool("MCP_AUDIT_INCLUDE_ARGUMENTS"),
    default: false,
    meaning: "Write the arguments, redacted, into audit lines (else only their SHA-256)",
  }),
  MCP_SCANNER_BLOCK: setting({
    group: "governance",
    schema: oneOf(
      "MCP_SCANNER_BLOCK",
      ["off", "info", "low", "medium", "high", "critical"] as const,
    ),
    default: "high",
    meaning:
      "Scanner findings at or above this severity quarantine their tool (`off`, `info` … `critical`)",
  }),
  MCP_SCANNER_APPROVAL: setting({
    group: "governance",
    schema: oneOf(
      "MCP_SCANNER_APPROVAL",
      ["off", "info", "low", "medium", "high", "critical"] as const,
    ),
    default: "medium",
    meaning:
      "Scanner findings at or above this severity (below the block) make calls need approval",
  }),
  MCP_LOG_LEVEL: setting({
    group: "observability",
    schema: oneOf("MCP_LOG_LEVEL", ["debug", "info", "warn", "error"] as const),
    default: "info",
    meaning: "`debug`, `info`, `warn`, `error` (logs go to stderr)",
  }),
  MCP_LOG_FORMAT: setting({
    group: "observability",
    schema: oneOf("MCP_LOG_FORMAT", ["text", "json"] as const),
    default: "text",
    meaning: "`text` or `json`",
  }),
};
