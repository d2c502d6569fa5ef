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
  serverSettings?: Record<string, unknown>;
}

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
  if (s.api === "completions") out.api = s.api; // fim is the server's own default
  return out;
}

/** The status bar text for the last completion (from the server's celeris/timings notification). */
export function statusText(enabled: boolean, lastMs: number | undefined, source?: string): string {
  if (!enabled) return "$(circle-slash) celeris";
  if (lastMs === undefined) return "$(zap) celeris";
  const cached = source === "typing-cache" ? " (cached)" : "";
  return `$(zap) celeris ${lastMs < 10 ? lastMs.toFixed(1) : Math.round(lastMs)} ms${cached}`;
}
