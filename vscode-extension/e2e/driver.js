// The end-to-end test's script (tests/vscode/test_vscode_e2e.py), on a running code-server (real VS
// Code) in headless Chromium with playwright-core:
//   1. opens COMPLETE_FILE, waits for the infill status bar item (model · device),
//      goes to COMPLETE_LINE, types COMPLETE_TYPED, waits for ghost text, accepts it with Tab, saves,
//   2. opens PARTIAL_FILE, asks for ghost text at the end of PARTIAL_LINE, accepts its next word
//      (Ctrl+Right) and then its next line (Accept Next Line, bound to Ctrl+Alt+L), reading the
//      line and the ghost text left after each, saves,
//   3. opens GLUE_FILE, asks for ghost text at the end of GLUE_LINE, accepts it with Tab, and
//      records every ghost text shown until the server has answered at the new cursor (read from
//      the extension's LSP trace), saves,
//   4. opens TYPING_FILE, types TYPING_TEXT at the end of TYPING_LINE at 30 ms a key, and records
//      the ghost texts shown after the last key (with the ms from it),
//   5. opens HOLES_FILE, runs "Infill: Fill Holes" from the command palette, waits for the
//      <FILL> markers to go, saves,
//   6. bad input: sets infill.serverPath (in the Settings editor) to a missing file, then at a crashing script, and checks
//      the error notifications (with their Show Logs action) and the status bar's error state.
// Writes OUT/results.json and OUT/*.png. Besides lib.js's environment: E2E_CRASHER,
// E2E_MODEL_LABEL, COMPLETE_*, PARTIAL_*, GLUE_*, TYPING_*, HOLES_FILE.
"use strict";
const {
    env, results, log, sleep, shot, until, runCommand, openFile, editorText, statusText, errorItem, waitForModel,
    ghostText, cursor, cursorLine, goToLineEnd, typeAndWatch, inlineAnswers, openWorkbench, run,
} = require("./lib");

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

run(async (page) => {
    // -- 0. the workbench and the server ------------------------------------------------------
    await openWorkbench(page);
    log("workbench loaded");
    const completeFile = env("COMPLETE_FILE");
    await openFile(page, completeFile);
    log(`opened ${completeFile}`);
    const ready = await waitForModel(page, env("E2E_MODEL_LABEL"), 180_000);
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

    // -- 2. partial accept: Accept Next Word (Ctrl+Right), then Accept Next Line (a user's key) ---
    await openFile(page, env("PARTIAL_FILE"));
    await goToLineEnd(page, Number(env("PARTIAL_LINE")));
    await runCommand(page, "Trigger Inline Suggestion");
    const partial = (results.partial = { ghost: (await until("ghost text to accept in parts", () => ghostText(page), 60_000, 100)).text });
    partial.before = await cursorLine(page);
    log(`partial accept of ${JSON.stringify(partial.ghost)} after ${JSON.stringify(partial.before)}`);
    await shot(page, "03a-partial-ghost");
    for (const [step, key] of [["Word", "Control+ArrowRight"], ["Line", "Control+Alt+L"]]) {
        const was = await cursorLine(page);
        await page.keyboard.press(key);
        partial[`after${step}`] = await until(`Accept Next ${step} to change the line`, async () => {
            const line = await cursorLine(page);
            return line !== was ? line : null;
        }, 10_000, 20);
        partial[`ghostAfter${step}`] = (await ghostText(page))?.text ?? null;
        log(`accept next ${step.toLowerCase()}: ${JSON.stringify(partial[`after${step}`])}, ghost text left: ${JSON.stringify(partial[`ghostAfter${step}`])}`);
        await shot(page, `03b-partial-after-${step.toLowerCase()}`);
    }
    await page.keyboard.press("Control+S");
    await sleep(500);

    // -- 3. after a Tab accept that ends in a word, no ghost text glued onto that word ------------
    const glueFile = env("GLUE_FILE");
    await openFile(page, glueFile);
    await goToLineEnd(page, Number(env("GLUE_LINE")));
    await runCommand(page, "Trigger Inline Suggestion");
    const glue = (results.glue = { ghost: (await until("ghost text to accept", () => ghostText(page), 60_000, 100)).text });
    const beforeAccept = await cursorLine(page);
    const acceptedAt = Date.now();
    await page.keyboard.press("Tab");
    glue.line = await until("the accept", async () => {
        const line = await cursorLine(page);
        return line !== beforeAccept ? line : null;
    }, 10_000, 20);
    const at = await cursor(page);
    glue.position = { line: at.line - 1, character: at.column - 1 }; // LSP, 0-based
    // every ghost text shown from the accept until the server has answered at the new position
    // (the extension's trace) and a moment after
    glue.ghostsAfter = [];
    let answeredAt = null;
    await until("the server's answer after the accept", async () => {
        const g = await ghostText(page);
        if (g && g.text !== glue.ghostsAfter.at(-1)?.text) glue.ghostsAfter.push({ ms: Date.now() - acceptedAt, text: g.text });
        if (!answeredAt && inlineAnswers(glueFile, glue.position, acceptedAt).length) answeredAt = Date.now();
        return answeredAt && Date.now() - answeredAt > 1500;
    }, 60_000, 50);
    glue.answers = inlineAnswers(glueFile, glue.position, acceptedAt);
    log(`accepted ${JSON.stringify(glue.ghost)}; the server then offered ${JSON.stringify(glue.answers)}; ghost text shown: ${JSON.stringify(glue.ghostsAfter.slice(0, 3))}`);
    await shot(page, "03c-after-glue-accept");
    await page.keyboard.press("Control+S");
    await sleep(500);

    // -- 4. typing fast (30 ms a key): the ghost text after the last key ---------------------------
    await openFile(page, env("TYPING_FILE"));
    await goToLineEnd(page, Number(env("TYPING_LINE")));
    const typing = (results.typing = { seen: (await typeAndWatch(page, env("TYPING_TEXT"), 30, 2000, 60_000)).seen });
    typing.line = await cursorLine(page);
    typing.column = (await cursor(page)).column;
    typing.lastKeyToGhostMs = typing.seen.find((s) => s.text)?.ms ?? null;
    log(`typed ${JSON.stringify(env("TYPING_TEXT"))} at 30 ms a key: ${JSON.stringify(typing.seen)}`);
    await shot(page, "03d-typed-fast");

    // -- 5. Fill Holes: two <FILL> markers, one edit ----------------------------------------------
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

    // -- 6. bad input: a missing server, then a crashing one ----------------------------------------
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
});
