// Next edits (celeris/nextEdit): after a change, the server proposes the same change where it applies next.
// Shown where it applies (the old text struck through, the new text after it); Tab goes there, Tab again
// makes it (then the one after it is asked for); Escape dismisses it. A change to the document withdraws it.
import * as vscode from "vscode";
import type { LanguageClient } from "vscode-languageclient/node";

interface LspRange {
  start: { line: number; character: number };
  end: { line: number; character: number };
}
interface NextEditResult {
  edits: { range: LspRange; newText: string }[];
  kind: string;
  remaining: number;
  version: number;
}
interface Shown {
  uri: string;
  version: number;
  edits: { range: vscode.Range; newText: string }[];
}

const DELAY_MS = 150;

export class NextEdits implements vscode.Disposable {
  private shown: Shown | undefined;
  private timer: NodeJS.Timeout | undefined;
  private asked = 0; // the latest request's number: an older answer is dropped
  private readonly decoration = vscode.window.createTextEditorDecorationType({
    textDecoration: "line-through",
    backgroundColor: new vscode.ThemeColor("diffEditor.removedTextBackground"),
  });
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly client: () => LanguageClient | undefined,
    private readonly enabled: () => boolean,
  ) {
    this.disposables.push(
      this.decoration,
      vscode.workspace.onDidChangeTextDocument((event) => {
        if (event.contentChanges.length === 0) return;
        if (this.shown && this.shown.uri === event.document.uri.toString()) this.clear();
        const editor = vscode.window.activeTextEditor;
        if (editor && editor.document === event.document) this.schedule(editor);
      }),
      vscode.window.onDidChangeActiveTextEditor(() => this.clear()),
      vscode.commands.registerCommand("celeris.nextEdit", () => this.goOrAccept()),
      vscode.commands.registerCommand("celeris.acceptNextEdit", () => this.accept()),
      vscode.commands.registerCommand("celeris.dismissNextEdit", () => this.clear()),
    );
  }

  dispose() {
    if (this.timer) clearTimeout(this.timer);
    this.disposables.forEach((d) => d.dispose());
  }

  private schedule(editor: vscode.TextEditor) {
    if (this.timer) clearTimeout(this.timer);
    if (!this.enabled()) return;
    this.timer = setTimeout(() => this.request(editor), DELAY_MS);
  }

  private async request(editor: vscode.TextEditor) {
    const client = this.client();
    if (!client || vscode.window.activeTextEditor !== editor) return;
    const document = editor.document;
    const version = document.version;
    const asked = ++this.asked;
    let result: NextEditResult | null;
    try {
      result = await client.sendRequest<NextEditResult | null>("celeris/nextEdit", {
        textDocument: { uri: document.uri.toString() },
        position: client.code2ProtocolConverter.asPosition(editor.selection.active),
      });
    } catch {
      return; // (the server reports its own failures)
    }
    // Only for the document as it is now, and only the latest answer.
    if (!result || !result.edits?.length || asked !== this.asked) return;
    if (document.version !== version || result.version !== version || vscode.window.activeTextEditor !== editor) return;
    const edits = result.edits.map((e) => ({ range: client.protocol2CodeConverter.asRange(e.range), newText: e.newText }));
    this.show(editor, { uri: document.uri.toString(), version, edits });
  }

  private show(editor: vscode.TextEditor, shown: Shown) {
    this.shown = shown;
    const options: vscode.DecorationOptions[] = shown.edits.map((e) => ({
      range: e.range,
      hoverMessage: `celeris-complete: next edit (Tab goes there, Tab again makes it): ${e.newText}`,
      renderOptions: {
        after: {
          contentText: e.newText.replace(/\n/g, "⏎") || "⌫",
          color: new vscode.ThemeColor("editor.foreground"),
          backgroundColor: new vscode.ThemeColor("diffEditor.insertedTextBackground"),
        },
      },
    }));
    editor.setDecorations(this.decoration, options);
    vscode.commands.executeCommand("setContext", "celeris.nextEditVisible", true);
  }

  clear() {
    this.shown = undefined;
    vscode.window.visibleTextEditors.forEach((e) => e.setDecorations(this.decoration, []));
    vscode.commands.executeCommand("setContext", "celeris.nextEditVisible", false);
  }

  private current(): { editor: vscode.TextEditor; shown: Shown } | undefined {
    const editor = vscode.window.activeTextEditor;
    const shown = this.shown;
    if (!editor || !shown || editor.document.uri.toString() !== shown.uri || editor.document.version !== shown.version) {
      return undefined;
    }
    return { editor, shown };
  }

  /** Tab: to the edit when the cursor is elsewhere, else make it. */
  async goOrAccept() {
    const here = this.current();
    if (!here) return this.clear();
    const start = here.shown.edits[0].range.start;
    if (!here.editor.selection.active.isEqual(start)) {
      here.editor.selection = new vscode.Selection(start, start);
      here.editor.revealRange(here.shown.edits[0].range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      return;
    }
    await this.accept();
  }

  async accept() {
    const here = this.current();
    this.clear();
    if (!here) return;
    const edit = new vscode.WorkspaceEdit();
    here.shown.edits.forEach((e) => edit.replace(here.editor.document.uri, e.range, e.newText));
    await vscode.workspace.applyEdit(edit);
  }
}
