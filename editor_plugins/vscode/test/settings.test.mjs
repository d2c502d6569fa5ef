import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { DEFAULT_LANGUAGES, protocolInlineContext, serverSettings, statusText } = require("../dist/settings.js");
const { readFileSync } = require("node:fs");

test("only set values are sent, under the server's names", () => {
  assert.deepEqual(serverSettings({}), {});
  assert.deepEqual(serverSettings({ backend: "auto", quant: "auto", steps: null }), {});
  assert.deepEqual(serverSettings({ quant: "none" }), { quant: "none" }); // fp32 asked for: not the default
  assert.deepEqual(
    serverSettings({ model: "/m", backend: "onnx", quant: "int8", steps: 6, budgetMs: 80 }),
    { model: "/m", backend: "onnx", quant: "int8", steps: 6, budget_ms: 80 },
  );
});

test("drafts: only turning them off is sent", () => {
  assert.deepEqual(serverSettings({ drafts: true }), {});
  assert.deepEqual(serverSettings({ drafts: false }), { drafts: false });
});

test("a remote endpoint: its URL, the key's variable name, a non-default API", () => {
  assert.deepEqual(serverSettings({ endpoint: " ", apiKeyEnv: "", api: "fim" }), {});
  assert.deepEqual(
    serverSettings({ endpoint: "https://gpu.example:8000 ", apiKeyEnv: "GPU_BOX_KEY", api: "completions" }),
    { endpoint: "https://gpu.example:8000", api_key_env: "GPU_BOX_KEY", api: "completions" },
  );
  assert.deepEqual(serverSettings({ endpoint: "http://127.0.0.1:8000", api: "other" }), { endpoint: "http://127.0.0.1:8000" });
});

test("the chat API is sent; so is a second tier", () => {
  assert.deepEqual(serverSettings({ endpoint: "http://h:1", api: "chat" }), { endpoint: "http://h:1", api: "chat" });
  assert.deepEqual(
    serverSettings({ escalateEndpoint: " https://tier.example ", escalateApiKeyEnv: "TIER_KEY", escalateApi: "chat" }),
    { escalate_endpoint: "https://tier.example", escalate_api_key_env: "TIER_KEY", escalate_api: "chat" },
  );
  assert.deepEqual(serverSettings({ escalateEndpoint: "", escalateApi: "fim" }), {});
});

test("other server settings pass through, named settings win", () => {
  assert.deepEqual(serverSettings({ serverSettings: { eos_penalty: 2, steps: 9 }, steps: 3 }), { eos_penalty: 2, steps: 3 });
});

test("bad numbers are left out rather than sent", () => {
  assert.deepEqual(serverSettings({ steps: 0, budgetMs: -1 }), {});
  assert.deepEqual(serverSettings({ steps: 2.5 }), {});
});

test("status bar text", () => {
  assert.equal(statusText(false, 12), "$(circle-slash) celeris");
  assert.equal(statusText(true, undefined), "$(zap) celeris");
  assert.equal(statusText(true, 4.25), "$(zap) celeris 4.3 ms");
  assert.equal(statusText(true, 37.6, "typing-cache"), "$(zap) celeris 38 ms (cached)");
  assert.equal(statusText(true, 12, "model", "local", 0.734), "$(zap) celeris 12 ms 73%"); // how sure it is
  assert.equal(statusText(true, 12, "model", "local", null), "$(zap) celeris 12 ms");
  assert.equal(statusText(true, 340, "tier", "escalated", null), "$(zap) celeris 340 ms tier 2"); // who answered
});

test("inline completion context: the protocol's trigger kinds, a plain range", () => {
  assert.deepEqual(protocolInlineContext({ triggerKind: 1 }), { triggerKind: 2, selectedCompletionInfo: undefined }); // typing
  assert.equal(protocolInlineContext({ triggerKind: 0 }).triggerKind, 1); // asked for (Alt+\\)
  class Range { // as VS Code's: serialized as [start, end]
    constructor(start, end) { this.start = start; this.end = end; }
    toJSON() { return [this.start, this.end]; }
  }
  const info = { range: new Range({ line: 2, character: 11 }, { line: 2, character: 12 }), text: "total" };
  assert.deepEqual(JSON.parse(JSON.stringify(protocolInlineContext({ triggerKind: 1, selectedCompletionInfo: info }))), {
    triggerKind: 2,
    selectedCompletionInfo: { range: { start: { line: 2, character: 11 }, end: { line: 2, character: 12 } }, text: "total" },
  });
});

test("the default languages are package.json's", () => {
  const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  assert.deepEqual(manifest.contributes.configuration.properties["celeris.languages"].default, DEFAULT_LANGUAGES);
  for (const id of ["typescriptreact", "javascriptreact", "go", "rust"]) assert.ok(DEFAULT_LANGUAGES.includes(id));
});
