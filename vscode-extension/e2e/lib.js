// What the playwright scripts of this folder share (driver.js, the end-to-end test's;
// first_suggestion.js, the benchmark's): the browser, the results file, and the ways a user works
// the workbench (command palette, Quick Open, Go to Line, the keyboard) and reads it back (the
// status bar, ghost text, the line under the cursor, the extension's trace log).
// The environment comes from codeserver.py: E2E_URL, E2E_WORKSPACE, E2E_OUT, E2E_TOOLS,
// E2E_CHROMIUM, E2E_LOGS.
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
const fatal = (message) => Object.assign(new Error(message), { fatal: true });

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

/** Waits for the status bar to show `label` (model · device), failing at once on another model or
 * the error state. */
async function waitForModel(page, label, timeoutMs) {
    return until(`the status bar to show ${label}`, async () => {
        const texts = await statusText(page);
        const hit = texts.find((t) => t.includes(label));
        if (hit) return hit;
        const other = texts.find((t) => t.includes(" · cpu") || t.includes(" · cuda"));
        if (other) throw fatal(`the status bar shows another model: ${other}`);
        const err = await errorItem(page);
        if (err) throw fatal(`the infill status bar item shows an error: ${err}`);
        return null;
    }, timeoutMs, 100).catch(async (e) => {
        throw new Error(`${e.message}; last error: ${await errorItem(page)}`);
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

/** The cursor (1-based line and column, from the status bar's "Ln 7, Col 29"). */
async function cursor(page) {
    const texts = await statusText(page);
    const m = texts.map((t) => /^Ln (\d+), Col (\d+)/.exec(t)).find(Boolean);
    if (!m) throw new Error(`no cursor position in the status bar: ${texts.join(" | ")}`);
    return { line: Number(m[1]), column: Number(m[2]) };
}

/** The document's text on the cursor's line (the view line under the cursor, ghost text left out). */
async function cursorLine(page) {
    const { line } = await cursor(page);
    return page.evaluate((lineNumber) => {
        const editor = document.querySelector(".editor-group-container .monaco-editor");
        const number = [...editor.querySelectorAll(".margin-view-overlays .line-numbers")].find((e) => e.textContent.trim() === String(lineNumber));
        if (!number) return null;
        const top = number.closest("[style*='top']")?.style.top ?? number.parentElement.style.top;
        const view = [...editor.querySelectorAll(".view-lines .view-line")].find((e) => e.style.top === top);
        if (!view) return null;
        const copy = view.cloneNode(true);
        copy.querySelectorAll("[class*='ghost-text']").forEach((e) => e.remove());
        return copy.textContent.replace(/\u00a0/g, " ");
    }, line);
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

/** Types `text` at `delayMs` a key, then watches the ghost text until it has not changed for
 * `quietMs`: {lastKey (ms since the epoch), seen: the ghost texts shown after it, each with the ms from it}. */
async function typeAndWatch(page, text, delayMs, quietMs, timeoutMs) {
    await page.keyboard.type(text, { delay: delayMs });
    const lastKey = Date.now();
    const seen = [];
    let current = null;
    let changed = lastKey;
    while (Date.now() - changed < quietMs || (!seen.length && Date.now() - lastKey < timeoutMs)) {
        const g = (await ghostText(page))?.text ?? null;
        if (g !== current) {
            current = g;
            changed = Date.now();
            seen.push({ ms: changed - lastKey, text: g });
        }
        await sleep(20);
    }
    return { lastKey, seen };
}

/** The extension's LSP trace (infill.trace.server: verbose) as a list of messages: {at (ms since
 * the epoch), kind ("request", "response", "notification"), method, id, body (the JSON after it)}. */
function traceMessages() {
    const files = [];
    const walk = (dir) => {
        for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
            const p = path.join(dir, e.name);
            if (e.isDirectory()) walk(p);
            else if (e.name.endsWith("Infill LSP Trace.log")) files.push(p);
        }
    };
    walk(env("E2E_LOGS"));
    const out = [];
    for (const file of files) {
        const entries = fs.readFileSync(file, "utf8").split(/\n(?=\d{4}-\d\d-\d\dT[\d:.]+Z \[)/);
        for (const entry of entries) {
            const [head, ...rest] = entry.trim().split("\n");
            const m = /^(\S+) \[\w+\] (Sending|Received) (request|response|notification) '([^']*?)(?: - \((\d+)\))?'/.exec(head);
            if (!m) continue;
            let body = null;
            try {
                body = JSON.parse(rest.join("\n").replace(/^(Params|Result): /, ""));
            } catch {
                body = null; // no result, or a line still being written
            }
            const failed = /Request failed/.test(head);
            out.push({ at: Date.parse(m[1]), kind: m[3], method: m[4], id: m[5] ? Number(m[5]) : null, body, failed });
        }
    }
    return out;
}

/** The server's answers to inline completion requests at `position` (LSP, 0-based) in a file
 * named `name`, sent after `since` (ms since the epoch): [{id, items: [insertText...]}]. */
function inlineAnswers(name, position, since) {
    const messages = traceMessages();
    const asked = messages.filter((m) => m.kind === "request" && m.method === "textDocument/inlineCompletion" && m.at >= since - 50
        && m.body?.textDocument?.uri?.endsWith(`/${name}`) && m.body.position.line === position.line && m.body.position.character === position.character);
    return asked.flatMap((q) => messages.filter((m) => m.kind === "response" && m.id === q.id && !m.failed)
        .map((m) => ({ id: q.id, items: (m.body?.items ?? []).map((i) => (typeof i.insertText === "string" ? i.insertText : i.insertText?.value)) })));
}

async function launch() {
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
    return { browser, page, userDir };
}

/** Runs `steps(page)` in a fresh browser, records a failure (with a screenshot) in results, writes
 * results.json and exits 0 when results.ok was set. */
async function main(steps) {
    const { browser, page, userDir } = await launch();
    try {
        await steps(page);
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

function run(steps) {
    main(steps).catch((e) => {
        console.error(e);
        results.errors.push(String(e));
        save();
        process.exit(2);
    });
}

/** Opens the workbench on the workspace. */
async function openWorkbench(page) {
    await page.goto(`${env("E2E_URL")}/?folder=${encodeURIComponent(env("E2E_WORKSPACE"))}`);
    await page.locator(".monaco-workbench").waitFor({ timeout: 60_000 });
}

module.exports = {
    env, results, log, sleep, shot, until, runCommand, openFile, editorText, statusText, errorItem, waitForModel,
    ghostText, cursor, cursorLine, goToLineEnd, typeAndWatch, traceMessages, inlineAnswers, openWorkbench, run,
};
