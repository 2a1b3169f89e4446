// The drafts end-to-end test's script (tests/vscode/test_vscode_drafts.py), on a running
// code-server (real VS Code) in headless Chromium, with infill.drafts on and a server whose fill
// streams slowly (the test's stand-in engine):
//   1. opens DRAFTS_FILE, waits for the status bar (E2E_MODEL_LABEL), goes to the end of
//      DRAFTS_LINE, types DRAFTS_TYPED, and records every ghost text shown (with the ms from the
//      last key) until it has not changed for QUIET_MS: the drafts, then the final fill;
//   2. goes to the end of ESCAPE_LINE, types ESCAPE_TYPED, presses Escape once a draft shows, and
//      records every ghost text shown in the next ESCAPE_WATCH_MS (none: the fill was stopped).
// Writes OUT/results.json and OUT/*.png. Besides lib.js's environment: E2E_MODEL_LABEL, DRAFTS_*,
// ESCAPE_*.
"use strict";
const { env, results, log, sleep, shot, until, openFile, waitForModel, ghostText, goToLineEnd, openWorkbench, run } = require("./lib");

const QUIET_MS = 1500;

/** The ghost texts shown from now until `stop(seen)` is true (checked every 20 ms), each with the
 * ms from `since`. */
async function watch(page, since, stop, timeoutMs) {
    const seen = [];
    let current;
    const end = Date.now() + timeoutMs;
    while (Date.now() < end) {
        const g = (await ghostText(page))?.text ?? null;
        if (g !== current) {
            current = g;
            seen.push({ ms: Date.now() - since, text: g });
        }
        if (stop(seen)) break;
        await sleep(20);
    }
    return seen;
}

run(async (page) => {
    await openWorkbench(page);
    await openFile(page, env("DRAFTS_FILE"));
    results.statusReady = await waitForModel(page, env("E2E_MODEL_LABEL"), 120_000);
    log(`status bar: ${results.statusReady}`);

    // -- 1. drafts, then the final fill ---------------------------------------------------------
    await goToLineEnd(page, Number(env("DRAFTS_LINE")));
    await page.keyboard.type(env("DRAFTS_TYPED"), { delay: 30 });
    const lastKey = Date.now();
    results.seen = await watch(page, lastKey, (seen) => seen.at(-1).text && Date.now() - lastKey - seen.at(-1).ms > QUIET_MS, 60_000);
    log(`ghost texts shown: ${JSON.stringify(results.seen)}`);
    await shot(page, "01-final");

    // -- 2. Escape while a draft shows ---------------------------------------------------------
    await page.keyboard.press("Escape");
    await goToLineEnd(page, Number(env("ESCAPE_LINE")));
    await page.keyboard.type(env("ESCAPE_TYPED"), { delay: 30 });
    const typed = Date.now();
    results.escapeDraft = (await until("a draft to dismiss", () => ghostText(page), 30_000, 20)).text;
    await page.keyboard.press("Escape");
    const escaped = Date.now();
    log(`Escape at ${escaped - typed} ms, on the draft ${JSON.stringify(results.escapeDraft)}`);
    await sleep(100); // (VS Code hides it)
    results.afterEscape = (await watch(page, escaped, () => false, Number(env("ESCAPE_WATCH_MS")))).filter((s) => s.text);
    log(`ghost texts shown after Escape: ${JSON.stringify(results.afterEscape)}`);
    results.ok = true;
});
