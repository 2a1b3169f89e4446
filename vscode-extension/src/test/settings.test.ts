import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { SERVER_KEYS, affectsServer, configurationPayload, needsRestart, toServerOptions } from "../settings";

const exp = { home: "/home/u", workspaceFolder: "/ws" };
const ROOT = path.resolve(__dirname, "..", "..");
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
const props: Record<string, { default?: unknown }> = pkg.contributes.configuration.properties;

function getter(values: Record<string, unknown>): (k: string) => unknown {
    return (k) => (k in values ? values[k] : props[`infill.${k}`]?.default);
}

test("defaults: only what has a value is sent, client-only settings never", () => {
    const opts = toServerOptions(getter({}), exp);
    assert.deepEqual(opts, { device: "auto", maxTokens: 32, debounceMs: 30, constrained: true, retry: false, cursorCandidates: 1, drafts: 0, relatedFiles: false });
    for (const k of ["enable", "serverPath", "serverArgs", "trace"]) assert.ok(!(k in opts));
});

test("every server option maps, with paths expanded", () => {
    const opts = toServerOptions(getter({
        modelPath: "~/models/m", device: "cuda:1", maxTokens: 64, steps: 8, threshold: 0.9,
        debounceMs: 0, constrained: false, retry: true, feedbackFile: "${workspaceFolder}/fb.json", serverPath: "/x/infill", enable: false,
        minScore: -0.4, cursorCandidates: 4, drafts: 2, relatedFiles: true,
    }), exp);
    assert.deepEqual(opts, {
        modelPath: "/home/u/models/m", device: "cuda:1", maxTokens: 64, steps: 8, threshold: 0.9,
        debounceMs: 0, constrained: false, retry: true, feedbackFile: "/ws/fb.json", minScore: -0.4,
        cursorCandidates: 4, drafts: 2, relatedFiles: true,
    });
    assert.deepEqual(configurationPayload(opts), { infill: opts });
});

test("empty, null and mistyped values are left to the server's defaults", () => {
    const opts = toServerOptions(getter({ modelPath: "  ", device: "", steps: null, threshold: null, maxTokens: 3.5, debounceMs: "10", constrained: "yes", retry: null, minScore: 0.5, cursorCandidates: -1, drafts: 1.5, relatedFiles: "no" }), exp);
    assert.deepEqual(opts, {});
});

test("which changes restart the server and which are sent to it", () => {
    const only = (s: string) => (x: string) => x === s || s.startsWith(x + ".");
    assert.equal(needsRestart(only("infill.serverPath")), true);
    assert.equal(needsRestart(only("infill.serverArgs")), true);
    assert.equal(needsRestart(only("infill.maxTokens")), false);
    assert.equal(affectsServer(only("infill.maxTokens")), true);
    assert.equal(affectsServer(only("infill.enable")), false);
});

test("package.json settings mirror the server's options (lsp/options.py)", (t) => {
    const optionsPy = path.resolve(ROOT, "..", "lsp", "options.py");
    if (!fs.existsSync(optionsPy)) {
        t.skip("lsp/options.py not found");
        return;
    }
    const src = fs.readFileSync(optionsPy, "utf8");
    const body = src.slice(src.indexOf("class Options"), src.indexOf("def model_key"));
    const fields = [...body.matchAll(/^\s{4}([a-z_]+):/gm)].map((m) => m[1].replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()));
    assert.deepEqual([...fields].sort(), [...SERVER_KEYS].sort());
    for (const k of SERVER_KEYS) assert.ok(props[`infill.${k}`], `package.json lacks infill.${k}`);
    // and the defaults agree where the server has a fixed one
    assert.equal(props["infill.maxTokens"].default, Number(/max_tokens: int = (\d+)/.exec(src)?.[1]));
    assert.equal(props["infill.debounceMs"].default, Number(/debounce_ms: int = (\d+)/.exec(src)?.[1]));
    assert.equal(props["infill.constrained"].default, /constrained: bool = True/.test(src));
});
