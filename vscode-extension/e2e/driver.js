// Drives a running code-server (real VS Code) in headless Chromium with playwright-core:
//   1. opens COMPLETE_FILE, waits for the infill status bar item (model · device),
//   2. goes to COMPLETE_LINE, types COMPLETE_TYPED, waits for ghost text, accepts it with Tab, saves,
//   3. opens HOLES_FILE, runs "Infill: Fill Holes" from the command palette, waits for the
//      <FILL> markers to go, saves,
//   4. bad input: sets infill.serverPath (in the Settings editor) to a missing file, then at a crashing script, and checks
//      the error notifications (with their Show Logs action) and the status bar's error state.
// Writes OUT/results.json and OUT/*.png. Everything it needs comes from the environment
// (tests/vscode/test_vscode_e2e.py sets it): E2E_URL, E2E_WORKSPACE, E2E_OUT, E2E_TOOLS,
// E2E_CHROMIUM, E2E_CRASHER, E2E_MODEL_LABEL, COMPLETE_*, HOLES_FILE.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");

const env = (k, d) => {
    const v = process.env[k] ?? d;
    if (v === undefined) throw new Error(`driver: ${k} is not set`);
    return v;
};
const { chromium } = require(path.join(env("E2E_TOOLS"), "node_modules", "playwright-core"));

const OUT = env("E2E_OUT");
const results = { steps: [], errors: [] };
const t0 = Date.now();
const log = (msg) => {
    const line = `[${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`;
    console.log(line);
    results.steps.push(line);
};
const save = () => fs.writeFileSync(path.join(OUT, "results.json"), JSON.stringify(results, null, 2));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function shot(page, name) {
    await page.screenshot({ path: path.join(OUT, `${name}.png`) });
    log(`screenshot ${name}.png`);
}

async function until(what, fn, timeoutMs, everyMs = 250) {
    const end = Date.now() + timeoutMs;
    let last;
    while (Date.now() < end) {
        try {
            last = await fn();
            if (last) return last;
        } catch (e) {
            if (e && e.fatal) throw e;
            last = e;
        }
        await sleep(everyMs);
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

async function runCommand(page, title) {
    await page.keyboard.press("F1");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: 10_000 });
    await input.fill(`>${title}`);
    const exact = new RegExp(`^\\s*${title.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s*$`);
    const row = page.locator(".quick-input-list .monaco-list-row").filter({ has: page.locator(".label-name", { hasText: exact }) }).first();
    await row.waitFor({ state: "visible", timeout: 10_000 });
    await row.click();
}

async function openFile(page, name) {
    await page.keyboard.press("Control+P");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: 10_000 });
    await input.fill(name);
    const row = page.locator(`.quick-input-list .monaco-list-row:has-text("${name}")`).first();
    await row.waitFor({ state: "visible", timeout: 15_000 });
    await row.click();
    await page.locator(`.tab.active:has-text("${name}")`).waitFor({ timeout: 15_000 });
    await editorText(page); // the editor is there
    await page.locator(".editor-group-container .monaco-editor .view-lines").first().click();
}

async function editorText(page) {
    const lines = page.locator(".editor-group-container .monaco-editor .view-lines").first();
    await lines.waitFor({ timeout: 15_000 });
    return (await lines.innerText()).replace(/\u00a0/g, " ");
}

async function statusText(page) {
    const items = await page.locator(".statusbar-item").allInnerTexts();
    return items.map((t) => t.trim()).filter(Boolean);
}

/** The infill status bar item when it is in its error state (red background), else null. */
async function errorItem(page) {
    return page.evaluate(() => {
        const hits = [...document.querySelectorAll(".statusbar-item")]
            .filter((e) => /infill/.test(e.innerText) && (e.classList.contains("error-kind") || e.classList.contains("has-background-color")))
            .map((e) => `${e.innerText.trim()} [${e.className}] ${e.getAttribute("aria-label") ?? ""}`);
        return hits[0] ?? null;
    });
}

async function ghostText(page) {
    return page.evaluate(() => {
        const editor = document.querySelector(".editor-group-container .monaco-editor");
        if (!editor) return null;
        const inline = [...editor.querySelectorAll(".ghost-text-decoration, .ghost-text-decoration-preview")].map((e) => e.textContent);
        const zones = [...editor.querySelectorAll(".ghost-text .view-line, .ghost-text-view-zone .view-line")].map((e) => e.textContent);
        const text = [inline.join(""), ...zones].join("\n").replace(/\u00a0/g, " ");
        return text.trim() ? { inline, zones, text } : null;
    });
}

async function goToLineEnd(page, line) {
    await page.keyboard.press("Control+G");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: 10_000 });
    await input.fill(`:${line}`);
    await page.keyboard.press("Enter");
    await sleep(300);
    await page.keyboard.press("End");
}

/** Sets a string setting the way a user does: the Settings editor, searched by its id. */
async function setStringSetting(page, id, value, shotName) {
    await runCommand(page, "Preferences: Open User Settings");
    const editor = page.locator(".settings-editor");
    await editor.waitFor({ state: "visible", timeout: 15_000 });
    await sleep(500);
    // a machine-overridable setting: in code-server (a remote window) it lives on the Remote tab
    const remoteTab = page.locator('.settings-editor .settings-tabs-widget .action-label:has-text("Remote")').first();
    if (await remoteTab.count()) await remoteTab.click();
    await page.locator(".settings-editor .search-container .monaco-editor").first().click();
    await page.keyboard.press("Control+A");
    await page.keyboard.type(id);
    const input = page.locator(".settings-editor .setting-item-text input, .settings-editor .setting-item-contents input.input").first();
    await input.waitFor({ state: "visible", timeout: 15_000 });
    await sleep(500);
    await input.click();
    await page.keyboard.press("Control+A");
    await page.keyboard.type(value);
    await page.keyboard.press("Tab"); // commit
    await sleep(1200);
    if (shotName) await shot(page, shotName);
    // 1.139 shows the Settings editor as a modal: Escape closes it (or Close Editor when it is a tab)
    for (let i = 0; i < 3 && (await editor.isVisible()); i++) {
        await page.keyboard.press("Escape");
        await sleep(300);
    }
    if (await editor.isVisible()) await runCommand(page, "View: Close Editor");
    await editor.waitFor({ state: "hidden", timeout: 5_000 });
}

async function toastWith(page, text, timeoutMs) {
    const toast = page.locator(`.notifications-toasts .notification-toast:has-text("${text}")`).first();
    await toast.waitFor({ state: "visible", timeout: timeoutMs });
    return toast;
}

async function main() {
    fs.mkdirSync(OUT, { recursive: true });
    const userDir = fs.mkdtempSync(path.join(os.tmpdir(), "infill-e2e-chromium-"));
    const browser = await chromium.launchPersistentContext(userDir, {
        executablePath: env("E2E_CHROMIUM", "/usr/bin/chromium"),
        headless: true,
        viewport: { width: 1400, height: 900 },
        args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
    });
    const page = browser.pages()[0] ?? (await browser.newPage());
    page.setDefaultTimeout(30_000);
    try {
        // -- 0. the workbench and the server ------------------------------------------------------
        await page.goto(`${env("E2E_URL")}/?folder=${encodeURIComponent(env("E2E_WORKSPACE"))}`);
        await page.locator(".monaco-workbench").waitFor({ timeout: 60_000 });
        log("workbench loaded");
        const completeFile = env("COMPLETE_FILE");
        await openFile(page, completeFile);
        log(`opened ${completeFile}`);
        const label = env("E2E_MODEL_LABEL");
        const ready = await until(`the status bar to show ${label}`, async () => {
            const texts = await statusText(page);
            const hit = texts.find((t) => t.includes(label));
            if (hit) return hit;
            const other = texts.find((t) => t.includes(" · cpu") || t.includes(" · cuda"));
            if (other) throw Object.assign(new Error(`the status bar shows another model: ${other}`), { fatal: true });
            const err = await errorItem(page);
            if (err) throw Object.assign(new Error(`the infill status bar item shows an error: ${err}`), { fatal: true });
            return null;
        }, 180_000, 500).catch(async (e) => {
            throw new Error(`${e.message}; last error: ${await errorItem(page)}`);
        });
        results.statusReady = ready;
        log(`status bar: ${ready}`);
        await shot(page, "01-ready");

        // -- 1. ghost text as you type, accepted with Tab ---------------------------------------------
        await goToLineEnd(page, Number(env("COMPLETE_LINE")));
        const typed = env("COMPLETE_TYPED");
        const typeStart = Date.now();
        await page.keyboard.type(typed, { delay: 80 });
        log(`typed ${JSON.stringify(typed)}`);
        let ghost = await until("ghost text", () => ghostText(page), 60_000, 100).catch(() => null);
        if (!ghost) {
            log("no ghost text yet: Trigger Inline Suggestion");
            await runCommand(page, "Trigger Inline Suggestion");
            ghost = await until("ghost text (explicit)", () => ghostText(page), 60_000, 100);
        }
        results.ghostFirstMs = Date.now() - typeStart;
        await sleep(1500); // let a late result for the last keystroke replace an earlier one
        ghost = (await ghostText(page)) ?? (await until("ghost text (again)", () => ghostText(page), 30_000, 100));
        results.ghost = ghost;
        log(`ghost text after ${results.ghostFirstMs} ms: ${JSON.stringify(ghost.text)}`);
        await shot(page, "02-ghost-text");
        await page.keyboard.press("Tab");
        await sleep(500);
        results.afterTab = await editorText(page);
        await page.keyboard.press("Control+S");
        await sleep(800);
        await shot(page, "03-accepted");
        results.statusAfterCompletion = await statusText(page);
        log(`status bar after accepting: ${results.statusAfterCompletion.join(" | ")}`);

        // -- 2. Fill Holes: two <FILL> markers, one edit ----------------------------------------------
        const holesFile = env("HOLES_FILE");
        await openFile(page, holesFile);
        log(`opened ${holesFile}`);
        await shot(page, "04-holes-before");
        const fillStart = Date.now();
        await runCommand(page, "Infill: Fill Holes");
        await until("the <FILL> markers to be replaced", async () => !(await editorText(page)).includes("<FILL"), 120_000, 250);
        results.fillHolesMs = Date.now() - fillStart;
        log(`holes filled in ${results.fillHolesMs} ms`);
        await page.keyboard.press("Control+S");
        await sleep(800);
        await shot(page, "05-holes-filled");
        results.statusAfterHoles = await statusText(page);

        // -- 3. bad input: a missing server, then a crashing one ----------------------------------------
        await setStringSetting(page, "infill.serverPath", "/nonexistent/bin/infill", "06-settings-ui");
        const missing = await toastWith(page, "/nonexistent/bin/infill", 30_000);
        results.missingToast = (await missing.innerText()).replace(/\s+/g, " ");
        results.statusMissing = await until("the status bar error state", () => errorItem(page), 10_000).catch((e) => `not reached: ${e.message}`);
        log(`missing server: ${results.missingToast}`);
        await shot(page, "07-server-missing");
        await missing.locator('a.monaco-button:has-text("Show Logs"), .monaco-button:has-text("Show Logs")').first().click();
        const logView = page.locator(".output-view, .panel .monaco-editor").first();
        await logView.waitFor({ state: "visible", timeout: 10_000 });
        await until("the log to show server discovery", async () => {
            const texts = await page.locator(".part.panel .view-lines").allInnerTexts();
            return texts.join("\n").replace(/\u00a0/g, " ").includes("server discovery");
        }, 15_000);
        results.logsShown = true;
        await shot(page, "08-show-logs");

        await setStringSetting(page, "infill.serverPath", env("E2E_CRASHER"));
        const crash = await toastWith(page, "Restarting in", 60_000);
        results.crashToast = (await crash.innerText()).replace(/\s+/g, " ");
        log(`crashing server: ${results.crashToast}`);
        await shot(page, "09-server-crashing");
        results.crashStatus = await until("the status bar error state", () => errorItem(page), 120_000, 1000).catch((e) => `not reached: ${e.message}`);
        results.giveUpToast = await toastWith(page, "failed 6 times", 90_000).then((t) => t.innerText()).then((s) => s.replace(/\s+/g, " ")).catch(() => null);
        log(`after the restarts: ${results.crashStatus}; ${results.giveUpToast}`);
        await shot(page, "10-gave-up");
        results.ok = true;
    } catch (e) {
        results.errors.push(String(e && e.stack ? e.stack : e));
        log(`FAILED: ${e}`);
        await shot(page, "99-failure").catch(() => {});
    } finally {
        results.seconds = (Date.now() - t0) / 1000;
        save();
        await browser.close().catch(() => {});
        fs.rmSync(userDir, { recursive: true, force: true });
    }
    process.exit(results.ok ? 0 : 1);
}

main().catch((e) => {
    console.error(e);
    results.errors.push(String(e));
    save();
    process.exit(2);
});
