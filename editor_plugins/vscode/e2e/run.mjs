// Installs the .vsix into a fresh code-server, opens a Python file, types, waits for the ghost text,
// accepts it with Tab and checks the line. Usage: node run.mjs VSIX PYTHON MODEL_DIR OUT_DIR [TIER_URL TIER_TEXT]
// With a second tier (a server answering every completion with TIER_TEXT): then every local answer is made
// unsure (min_confidence 1), and the tier's answer must come up as ghost text on a new line, with the status
// bar saying that the second tier answered.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { chromium } from "playwright-core";

const [vsix, python, model, outDir, tierUrl, tierText] = process.argv.slice(2);
const here = new URL(".", import.meta.url).pathname;
const codeServer = join(here, "node_modules", ".bin", "code-server");
// code-server needs this very Node (24): put it first on PATH for everything spawned here.
const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` };
const root = mkdtempSync(join(tmpdir(), "celeris-vscode-"));
const dataDir = join(root, "data");
const extDir = join(root, "extensions");
const work = join(root, "work");
mkdirSync(join(dataDir, "User"), { recursive: true });
mkdirSync(work, { recursive: true });
mkdirSync(outDir, { recursive: true });
writeFileSync(join(work, "example.py"), "def add(first, second):\n    total = first + second\n    return \n");
// For the next edit: a parameter renamed on its definition line is then shown on the lines that use it.
writeFileSync(join(work, "scale.py"), "def scale(size):\n    print(size)\n    return size * 2\n");
const settings = {
  "security.workspace.trust.enabled": false,
  "workbench.startupEditor": "none",
  "editor.inlineSuggest.enabled": true,
  "extensions.autoUpdate": false,
  "telemetry.telemetryLevel": "off",
  "chat.disableAIFeatures": true,
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "celeris.serverCommand": ["/bin/sh", "-c", `env > ${join(outDir, "env.txt")}; exec ${python} -m celeris_complete.cli lsp --log-file ${join(outDir, "server.log")} 2>${join(outDir, "stderr.txt")}`],
  "celeris.model": model,
  // A high end-of-span penalty keeps suggestions non-empty: this test checks mechanics.
  "celeris.serverSettings": { "eos_penalty": 8.0, "mode": "line", "max_chars_after_cursor": 10, "min_confidence": 0 },
};
writeFileSync(join(dataDir, "User", "settings.json"), JSON.stringify(settings));

const install = spawnSync(codeServer, ["--user-data-dir", dataDir, "--extensions-dir", extDir, "--install-extension", vsix],
  { encoding: "utf8", env });
if (install.status !== 0) throw new Error(`installing the .vsix failed: ${install.stderr}`);

const port = 20000 + Math.floor(Math.random() * 20000);
const server = spawn(codeServer, ["--auth", "none", "--bind-addr", `127.0.0.1:${port}`, "--user-data-dir", dataDir,
  "--extensions-dir", extDir, "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", work],
  { stdio: ["ignore", "pipe", "pipe"], env });
let serverLog = "";
server.stdout.on("data", (d) => (serverLog += d));
server.stderr.on("data", (d) => (serverLog += d));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(fn, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try { const v = await fn(); if (v) return v; } catch { /* not yet */ }
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}`);
}

let browser;
let page;
try {
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, 60000, "code-server");
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(work)}`);
  await page.waitForSelector(".monaco-workbench", { timeout: 120000 });
  const entry = page.locator(".explorer-folders-view .monaco-list-row", { hasText: "example.py" }).first();
  await entry.waitFor({ timeout: 60000 });
  await entry.click();
  await page.waitForSelector(".monaco-editor .view-line", { timeout: 60000 });
  // The status bar item is there once the extension is active; the model then loads in the server.
  await waitFor(() => page.locator(".statusbar-item", { hasText: "celeris" }).count(), 120000, "the status bar item");
  await sleep(2000);
  await page.locator(".monaco-editor .view-line", { hasText: "return" }).first().click();
  await page.keyboard.press("End");
  let ghost = "";
  for (let attempt = 0; attempt < 40 && !ghost; attempt++) {
    await page.keyboard.type("t");
    ghost = await waitFor(async () => {
      const text = await page.locator(".ghost-text-decoration, .ghost-text").allInnerTexts();
      return text.join("").trim();
    }, 5000, "ghost text").catch(() => "");
    if (!ghost) await page.keyboard.press("Backspace");
  }
  if (!ghost) throw new Error("no ghost text appeared");
  await page.screenshot({ path: join(outDir, "ghost-text.png") });
  const column = async () => {
    const text = await page.locator(".statusbar-item", { hasText: "Ln " }).first().innerText();
    return Number(/Col (\d+)/.exec(text)[1]);
  };
  const colBefore = await column();
  await page.keyboard.press("Tab");
  await sleep(1000);
  await page.keyboard.press("Escape"); // hide any new suggestion, so the DOM holds only real text
  await sleep(500);
  const lines = (await page.locator(".monaco-editor .view-line").allInnerTexts()).map((s) => s.replace(/\u00a0/g, " "));
  await page.screenshot({ path: join(outDir, "accepted.png") });
  const line = lines.find((l) => l.startsWith("    return t")) || "";
  const colAfter = await column();
  const status = await page.locator(".statusbar-item", { hasText: "celeris" }).first().innerText();
  const accepted = line === "    return t" + ghost && colAfter === colBefore + ghost.length;
  const result = { ghost, line, colBefore, colAfter, status, accepted };
  {
    // Next edit: in scale.py, rename the parameter; the next use is struck through with the new name after
    // it; Tab goes there, Tab again makes the edit (then the one after is shown).
    const file = page.locator(".explorer-folders-view .monaco-list-row", { hasText: "scale.py" }).first();
    await file.click();
    await page.locator(".monaco-editor .view-line", { hasText: "def scale" }).first().waitFor({ timeout: 60000 });
    await page.locator(".monaco-editor .view-line", { hasText: "def scale" }).first().click();
    await page.keyboard.press("Home");
    for (let i = 0; i < 10; i++) await page.keyboard.press("ArrowRight"); // after "def scale("
    for (let i = 0; i < 4; i++) await page.keyboard.press("Shift+ArrowRight"); // "size"
    await page.keyboard.type("factor");
    await page.keyboard.press("Escape"); // no completion over it
    const struck = () => page.evaluate(() => [...document.querySelectorAll(".monaco-editor .view-line span")]
      .filter((s) => getComputedStyle(s).textDecorationLine.includes("line-through")).map((s) => s.textContent));
    result.nextEditStruck = await waitFor(async () => (await struck()).join("|"), 30000, "the next edit").catch(() => "");
    await page.screenshot({ path: join(outDir, "next-edit.png") });
    await page.keyboard.press("Tab"); // there
    await sleep(300);
    await page.keyboard.press("Tab"); // make it
    const texts = async () => (await page.locator(".monaco-editor .view-line").allInnerTexts()).map((s) => s.replace(/\u00a0/g, " "));
    result.nextEditLines = await waitFor(async () => {
      const lines = await texts();
      return lines.includes("    print(factor)") ? lines : "";
    }, 15000, "the next edit made").catch(async () => await texts());
    await page.screenshot({ path: join(outDir, "next-edit-made.png") });
    const example = page.locator(".tabs-container .tab", { hasText: "example.py" }).first();
    await example.click(); // back to the first file for what follows
    await sleep(500);
  }
  if (tierUrl) {
    // The second tier: the workspace's settings (VS Code notices the new file), a new line, the tier's answer.
    mkdirSync(join(work, ".vscode"), { recursive: true });
    writeFileSync(join(work, ".vscode", "settings.json"), JSON.stringify({
      "editor.quickSuggestions": { "other": "off", "comments": "off", "strings": "off" }, // no menu over the line
      "celeris.escalateEndpoint": tierUrl,
      "celeris.serverSettings": { ...settings["celeris.serverSettings"], "min_confidence": 1, "escalate_budget_ms": 10000 },
    }));
    await waitFor(() => readFileSync(join(outDir, "server.log"), "utf8").includes("escalate_endpoint"), 60000,
      "the server taking the second tier's settings");
    await page.locator(".monaco-editor .view-line", { hasText: "return t" }).first().click();
    await page.keyboard.press("End");
    await page.keyboard.press("Enter");
    // The last keystroke's local answer stays quiet (as "return t" got one before, it gets one now); the
    // tier's shows only if the extension asks again when the server says it came (celeris/escalated).
    await page.keyboard.type("return t");
    const tierGhost = await waitFor(async () => {
      const shown = await page.locator(".ghost-text-decoration, .ghost-text").allInnerTexts();
      const text = shown.join("").replace(/\u00a0/g, " ").trim(); // (blanks are drawn as no-break spaces)
      return text === tierText ? text : "";
    }, 30000, "the second tier's ghost text").catch(() => "");
    await page.screenshot({ path: join(outDir, "tier-ghost-text.png") });
    result.tierGhost = tierGhost;
    result.tierStatus = await page.locator(".statusbar-item", { hasText: "celeris" }).first().innerText();
  }
  writeFileSync(join(outDir, "result.json"), JSON.stringify(result, null, 2));
  console.log(JSON.stringify(result));
  if (!result.accepted) throw new Error(`Tab did not insert the suggestion: ${JSON.stringify(result)}`);
} catch (err) {
  if (page) await page.screenshot({ path: join(outDir, "failure.png") }).catch(() => {});
  writeFileSync(join(outDir, "code-server.log"), serverLog);
  console.error(String(err));
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  server.kill();
}
