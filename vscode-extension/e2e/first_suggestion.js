// The VS Code benchmark's script (bench/vscode_first_suggestion.py): time to the first suggestion
// after opening a file, on a running code-server in headless Chromium, as a user gets it.
//   a. from opening the window: the workbench, FIRST_FILE opened (which starts the extension and
//      the server), FIRST_TEXT typed at the end of FIRST_LINE at once (30 ms a key, while the model
//      loads), the status bar showing the model (E2E_MODEL_LABEL), the first ghost text;
//   b. with the model loaded: SECOND_FILE opened, SECOND_TEXT typed at the end of SECOND_LINE at
//      30 ms a key, its first ghost text (from the open and from the last key);
//   c. THIRD_FILE opened, THIRD_TEXT typed at the end of THIRD_LINE at 30 ms a key: the ms from
//      the last key to the first ghost text.
// All times in ms, in OUT/results.json (with the ghost texts seen). Environment: lib.js's and the
// variables named above.
"use strict";
const { env, results, log, sleep, openFile, waitForModel, ghostText, goToLineEnd, typeAndWatch, openWorkbench, run, until } = require("./lib");

const QUIET_MS = 1500; // the ghost text is settled when it has not changed for this long
const WAIT_MS = 120_000; // give up on a ghost text after this long

run(async (page) => {
    // -- a. the window opens ----------------------------------------------------------------------
    const t0 = Date.now();
    await openWorkbench(page);
    results.workbenchMs = Date.now() - t0;
    await openFile(page, env("FIRST_FILE"));
    results.firstFileOpenMs = Date.now() - t0;
    await goToLineEnd(page, Number(env("FIRST_LINE")));
    await page.keyboard.type(env("FIRST_TEXT"), { delay: 30 });
    const typedAt = Date.now() - t0;
    const label = env("E2E_MODEL_LABEL");
    // the status bar and the ghost text, whichever comes first
    let loaded = null;
    let ghost = null;
    await until("the model and the first ghost text", async () => {
        if (!loaded && (await page.locator(`.statusbar-item:has-text("${label}")`).count())) loaded = Date.now() - t0;
        if (!ghost) {
            const g = await ghostText(page);
            if (g) ghost = { ms: Date.now() - t0, text: g.text };
        }
        return loaded && ghost;
    }, WAIT_MS, 50).catch(async (e) => {
        if (!loaded) await waitForModel(page, label, 1000); // says what the status bar shows instead
        throw e;
    });
    Object.assign(results, { firstTypedMs: typedAt, modelLoadedMs: loaded, firstGhostMs: ghost.ms, firstGhost: ghost.text });
    log(`a. window open -> workbench ${results.workbenchMs} ms, ${env("FIRST_FILE")} open ${results.firstFileOpenMs} ms, typed ${typedAt} ms, model loaded ${loaded} ms, ghost text ${ghost.ms} ms: ${JSON.stringify(ghost.text)}`);
    await sleep(QUIET_MS);

    // -- b. another file, with the model loaded --------------------------------------------------------
    const t1 = Date.now();
    await openFile(page, env("SECOND_FILE"));
    results.secondOpenMs = Date.now() - t1;
    await goToLineEnd(page, Number(env("SECOND_LINE")));
    const beforeTyping = Date.now() - t1;
    const second = await typeAndWatch(page, env("SECOND_TEXT"), 30, QUIET_MS, WAIT_MS);
    const shown = second.seen.find((s) => s.text);
    if (!shown) throw new Error(`no ghost text in ${env("SECOND_FILE")}: ${JSON.stringify(second.seen)}`);
    Object.assign(results, { secondStartTypingMs: beforeTyping, secondSeen: second.seen, secondLastKeyToGhostMs: shown.ms,
        secondOpenToGhostMs: second.lastKey - t1 + shown.ms });
    log(`b. ${env("SECOND_FILE")} opened in ${results.secondOpenMs} ms; open -> ghost text ${results.secondOpenToGhostMs} ms, last key -> ghost text ${shown.ms} ms: ${JSON.stringify(shown.text)}`);

    // -- c. a line typed at 30 ms a key ----------------------------------------------------------------
    await openFile(page, env("THIRD_FILE"));
    await goToLineEnd(page, Number(env("THIRD_LINE")));
    await sleep(1000);
    const third = (await typeAndWatch(page, env("THIRD_TEXT"), 30, QUIET_MS, WAIT_MS)).seen;
    const fast = third.find((s) => s.text);
    if (!fast) throw new Error(`no ghost text in ${env("THIRD_FILE")}: ${JSON.stringify(third)}`);
    Object.assign(results, { thirdSeen: third, typingLastKeyToGhostMs: fast.ms });
    log(`c. typed ${JSON.stringify(env("THIRD_TEXT"))} at 30 ms a key: last key -> ghost text ${fast.ms} ms: ${JSON.stringify(fast.text)}`);
    results.ok = true;
});
