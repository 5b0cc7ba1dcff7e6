/**
 * Rule exfiltration: descriptions that move data somewhere the user did not ask for (raw IPs,
 * tunnels, webhooks, "send to", remote or third-party sinks, hidden copies).
 * @module
 */
import type { ScannerRule } from "../../core/plugin_api/mod.ts";
import { patternRule } from "./text.ts";

const NEGATION = /\b(?:does not|doesn't|do not|don't|never|not|no)\b/i;
// Reserved documentation domains (RFC 2606) are examples, not destinations.
const EXAMPLE_HOST = /\bexample\.(?:com|org|net)\b|\.(?:test|invalid|example|localhost)\b/i;
const TRANSFER =
  "send|sends|sent|sending|upload|uploads|uploaded|post|posts|posted|forward|forwards|forwarded|transmit\\w*|exfiltrat\\w*|stream\\w*|submit\\w*|leak\\w*|shar(?:e|ed|es)|sync(?:ed|s)?|logged|cached|stored|added";

/** Data leaving for an external destination. */
export const exfiltration: ScannerRule = patternRule({
  id: "exfiltration",
  severity: "high",
  description:
    "Sends data to raw IPs, tunnels, webhooks, remote or third-party sinks, or hidden copies",
  patterns: [
    {
      re: /\b(?:https?|ftp|wss?):\/\/(?:\d{1,3}\.){3}\d{1,3}\b/i,
      message: "points at a raw IP address",
    },
    {
      re:
        /\b(?:ngrok(?:-free)?\.(?:io|app|dev)|trycloudflare\.com|serveo\.net|loca\.lt|localtunnel\.me|webhook\.site|requestbin\.\w+|pipedream\.net|interact\.sh|oast\.\w+|burpcollaborator\.net|beeceptor\.com|hookbin\.com)\b/i,
      message: "points at a tunnel or request-capture service",
    },
    {
      re: /\bhooks\.slack\.com\/services\b|\bdiscord(?:app)?\.com\/api\/webhooks\b/i,
      message: "points at a chat webhook",
      severity: "medium",
    },
    {
      re: /\|[ \t]{0,8}(?:nc|netcat|ncat)[ \t]{1,8}\S{1,255}[ \t]{1,8}\d/,
      message: "pipes data to netcat",
    },
    {
      re: new RegExp(
        `\\b(?:${TRANSFER}|copy)\\b[^.\\n]{0,160}?(?:https?:\\/\\/[^\\s'"\`)]+|(?<![\\w.-])[\\w-]{1,63}(?:\\.[\\w-]{1,63}){0,6}\\.(?:com|net|org|io|ru|cn|xyz|top|site)\\b)`,
        "i",
      ),
      unless: new RegExp(`${EXAMPLE_HOST.source}|${NEGATION.source}`, "i"),
      message: "sends data to an external host",
    },
    {
      re: new RegExp(
        `\\b(?:${TRANSFER})\\b[^.\\n]{0,160}?(?:remote (?:server|endpoint|host|storage|location)|remotely|external(?:ly| (?:logging |analytics )?(?:endpoint|server|service))|third[- ]part(?:y|ies)|attacker|our (?:\\w+ ){0,3}(?:team|servers?)|marketing (?:database|list))`,
        "i",
      ),
      unless: NEGATION,
      message: "sends data to a remote or third-party sink",
    },
    {
      re: new RegExp(`\\b(?:${TRANSFER})\\b[^.\\n]{0,80}?\\b(?:via|to|in) (?:the )?cloud\\b`, "i"),
      unless: NEGATION,
      message: "syncs processed data to the cloud",
      severity: "medium",
    },
    {
      re:
        /\b(?:opted[- ]in|opt(?:s|ed)? (?:users? )?in) to (?:partner|third[- ]party|marketing)\b/i,
      message: "enrols users with partners or marketing",
      severity: "medium",
    },
    {
      re:
        /\b(?:always|all|every)\b[^.\n]{0,60}\b(?:bcc|cc|blind copy|a copy)\b|\b(?:bcc|send a copy|forward a copy)\b[^.\n]{0,60}\b(?:always|all|every)\b/i,
      message: "adds a hidden copy recipient",
    },
    {
      re: /\bpass\s{1,8}(?:private|sensitive|personal|confidential)\s{1,8}(?:information|data)\b/i,
      message: "tells the model to pass private data into the call",
    },
    {
      re:
        /\b(?:store|pass|send|include|collect|record|save|put)\s{1,8}(?:here\s{1,8})?(?:all|any|every)\s{1,8}(?:\w{1,40}\s{1,8}){0,2}(?:values|data|information|messages|secrets|credentials|files|conversations?)\b/i,
      // "Whether to include all information in the tree": a boolean's description, about output.
      unless: /\bwhether\b/i,
      message: "asks the model to hand over everything it has",
      severity: "medium",
    },
  ],
});
