// celeris-complete for VS Code: starts the language server over stdio; VS Code shows its inline
// completions as ghost text (with its own partial accept); a status bar item shows the last latency; the
// next edit after a change is shown where it applies (nextEdit.ts).
import * as vscode from "vscode";
import { LanguageClient, LanguageClientOptions, ServerOptions, TransportKind } from "vscode-languageclient/node";
import { NextEdits } from "./nextEdit";
import { DEFAULT_LANGUAGES, protocolInlineContext, serverSettings, statusText } from "./settings";

let client: LanguageClient | undefined;
let status: vscode.StatusBarItem;
let lastMs: number | undefined;
let lastSource: string | undefined;
let lastTier: string | undefined;
let lastConfidence: number | null | undefined;

function config() {
  const c = vscode.workspace.getConfiguration("celeris");
  return {
    command: c.get<string[]>("serverCommand", ["celeris-complete", "lsp"]),
    enabled: c.get<boolean>("enabled", true),
    languages: c.get<string[]>("languages", DEFAULT_LANGUAGES),
    settings: serverSettings({
      model: c.get<string>("model"),
      backend: c.get<string>("backend"),
      quant: c.get<string>("quant"),
      steps: c.get<number | null>("steps"),
      budgetMs: c.get<number>("budgetMs"),
      drafts: c.get<boolean>("drafts"),
      endpoint: c.get<string>("endpoint"),
      apiKeyEnv: c.get<string>("apiKeyEnv"),
      api: c.get<string>("api"),
      escalateEndpoint: c.get<string>("escalateEndpoint"),
      escalateApiKeyEnv: c.get<string>("escalateApiKeyEnv"),
      escalateApi: c.get<string>("escalateApi"),
      serverSettings: c.get<Record<string, unknown>>("serverSettings"),
    }),
  };
}

function refreshStatus() {
  status.text = statusText(config().enabled, lastMs, lastSource, lastTier, lastConfidence);
  status.tooltip = "celeris-complete: click to turn completions on or off";
}

async function start(context: vscode.ExtensionContext) {
  const c = config();
  const [command, ...args] = c.command;
  const serverOptions: ServerOptions = { command, args, transport: TransportKind.stdio };
  const clientOptions: LanguageClientOptions = {
    documentSelector: c.languages.map((language) => ({ language })),
    initializationOptions: c.settings,
    middleware: {
      provideInlineCompletionItems: (document, position, ctx, token, next) =>
        config().enabled
          ? next(document, position, { ...ctx, ...protocolInlineContext(ctx) } as vscode.InlineCompletionContext, token)
          : undefined,
    },
  };
  client = new LanguageClient("celeris", "celeris-complete", serverOptions, clientOptions);
  client.registerProposedFeatures(); // textDocument/inlineCompletion is a proposed (3.18) feature here
  context.subscriptions.push(
    client.onNotification(
      "celeris/timings",
      (params: { total_ms?: number; source?: string; tier?: string; confidence?: number | null }) => {
        lastMs = params.total_ms;
        lastSource = params.source;
        lastTier = params.tier;
        lastConfidence = params.confidence;
        refreshStatus();
      },
    ),
    // The second tier answered a keystroke the local model stayed quiet on: ask again (answered from the
    // server's cache) if the cursor is still where it was asked, in the same version of the document.
    client.onNotification(
      "celeris/escalated",
      (params: { uri: string; version: number; position: { line: number; character: number } }) => {
        const editor = vscode.window.activeTextEditor;
        if (!editor || editor.document.uri.toString() !== vscode.Uri.parse(params.uri).toString()) return;
        const at = editor.selection.active;
        if (editor.document.version !== params.version || !editor.selection.isEmpty) return;
        if (at.line !== params.position.line || at.character !== params.position.character) return;
        vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
      },
    ),
  );
  await client.start();
}

export async function activate(context: vscode.ExtensionContext) {
  status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  status.command = "celeris.toggle";
  refreshStatus();
  status.show();
  const nextEdits = new NextEdits(
    () => client,
    () => config().enabled && vscode.workspace.getConfiguration("celeris").get<boolean>("nextEdits", true),
  );
  context.subscriptions.push(
    status,
    nextEdits,
    vscode.commands.registerCommand("celeris.toggle", async () => {
      const c = vscode.workspace.getConfiguration("celeris");
      await c.update("enabled", !c.get<boolean>("enabled", true), vscode.ConfigurationTarget.Global);
      refreshStatus();
    }),
    vscode.commands.registerCommand("celeris.status", async () => {
      const result = await client?.sendRequest("celeris/status", {});
      vscode.window.showInformationMessage(`celeris-complete: ${JSON.stringify(result)}`);
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration("celeris")) return;
      refreshStatus();
      if (event.affectsConfiguration("celeris.serverCommand") || event.affectsConfiguration("celeris.languages")) {
        await client?.stop();
        await start(context);
      } else {
        await client?.sendNotification("workspace/didChangeConfiguration", { settings: { celeris: config().settings } });
      }
    }),
  );
  try {
    await start(context);
  } catch (err) {
    vscode.window.showErrorMessage(`celeris-complete: the language server did not start: ${err}`);
  }
}

export async function deactivate() {
  await client?.stop();
}
