// What the extension sends the server: VS Code settings mapped onto celeris-complete's settings.

export interface ExtensionSettings {
  model?: string;
  backend?: string;
  quant?: string;
  steps?: number | null;
  budgetMs?: number;
  drafts?: boolean;
  endpoint?: string;
  apiKeyEnv?: string;
  api?: string;
  escalateEndpoint?: string;
  escalateApiKeyEnv?: string;
  escalateApi?: string;
  serverSettings?: Record<string, unknown>;
}

/** The languages the extension attaches to unless celeris.languages says otherwise (package.json's default). */
export const DEFAULT_LANGUAGES = [
  "python", "javascript", "javascriptreact", "typescript", "typescriptreact", "go", "rust", "c", "cpp", "java", "lua",
  "shellscript",
];

/** The server's initializationOptions / didChangeConfiguration payload; unset values are left out. */
export function serverSettings(s: ExtensionSettings): Record<string, unknown> {
  const out: Record<string, unknown> = { ...(s.serverSettings ?? {}) };
  if (s.model) out.model = s.model;
  if (s.backend && s.backend !== "auto") out.backend = s.backend;
  if (s.quant && s.quant !== "auto") out.quant = s.quant;
  if (typeof s.steps === "number" && Number.isInteger(s.steps) && s.steps > 0) out.steps = s.steps;
  if (typeof s.budgetMs === "number" && s.budgetMs > 0) out.budget_ms = s.budgetMs;
  if (s.drafts === false) out.drafts = false; // on is the server's own default
  // A remote server instead of a local model: its URL, the variable holding its key (never the key).
  if (s.endpoint && s.endpoint.trim()) out.endpoint = s.endpoint.trim();
  if (s.apiKeyEnv && s.apiKeyEnv.trim()) out.api_key_env = s.apiKeyEnv.trim();
  if (s.api === "completions" || s.api === "chat") out.api = s.api; // fim is the server's own default
  // A second tier, asked when the local answer is unsure: its URL, its key's variable name, its API.
  if (s.escalateEndpoint && s.escalateEndpoint.trim()) out.escalate_endpoint = s.escalateEndpoint.trim();
  if (s.escalateApiKeyEnv && s.escalateApiKeyEnv.trim()) out.escalate_api_key_env = s.escalateApiKeyEnv.trim();
  if (s.escalateApi === "completions" || s.escalateApi === "chat") out.escalate_api = s.escalateApi;
  return out;
}

/** The status bar text for the last completion (from the server's celeris/timings notification): its
 * latency, and who answered: "tier 2" when the second tier did, else the local answer's confidence. */
export function statusText(
  enabled: boolean,
  lastMs: number | undefined,
  source?: string,
  tier?: string,
  confidence?: number | null,
): string {
  if (!enabled) return "$(circle-slash) celeris";
  if (lastMs === undefined) return "$(zap) celeris";
  const cached = source === "typing-cache" ? " (cached)" : "";
  let who = "";
  if (tier === "escalated") who = " tier 2";
  else if (typeof confidence === "number") who = ` ${Math.round(confidence * 100)}%`;
  return `$(zap) celeris ${lastMs < 10 ? lastMs.toFixed(1) : Math.round(lastMs)} ms${cached}${who}`;
}

interface Position {
  line: number;
  character: number;
}

/** An inline completion context as VS Code holds it (trigger kind: Invoke 0, Automatic 1). */
export interface EditorInlineContext {
  triggerKind: number;
  selectedCompletionInfo?: { range: { start: Position; end: Position }; text: string };
}

/** The context as the protocol has it. vscode-languageclient (9.0) passes VS Code's on as it is: its trigger
 * kind where the protocol's is Invoked 1, Automatic 2 (so every keystroke read as a request the user made),
 * and the selected menu item's range as VS Code's Range, which is sent as [start, end]. */
export function protocolInlineContext(ctx: EditorInlineContext): {
  triggerKind: number;
  selectedCompletionInfo?: { range: { start: Position; end: Position }; text: string };
} {
  const info = ctx.selectedCompletionInfo;
  const plain = (p: Position): Position => ({ line: p.line, character: p.character });
  return {
    triggerKind: ctx.triggerKind === 0 ? 1 : 2,
    selectedCompletionInfo: info && { range: { start: plain(info.range.start), end: plain(info.range.end) }, text: info.text },
  };
}
