import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { EditsWhileStarting, LanguageGate, gluesOntoAcceptedWord, serverLanguageIds, settingsQuery } from "../inline";

const PKG = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));
const README = fs.readFileSync(path.join(__dirname, "..", "..", "README.md"), "utf8");

test("the server's languages come from the initialize result or the infill/languages notification", () => {
    const init = { capabilities: { experimental: { infill: { languages: ["python"], languageIds: ["python"] } } } };
    assert.deepEqual(serverLanguageIds(init), ["python"]);
    assert.deepEqual(serverLanguageIds({ languages: ["tsx"], languageIds: ["typescriptreact", "tsx"] }), ["typescriptreact", "tsx"]);
    assert.equal(serverLanguageIds({ capabilities: {} }), undefined);
    assert.equal(serverLanguageIds(undefined), undefined);
});

test("other languages are refused with one notice per language", () => {
    const gate = new LanguageGate();
    assert.ok(gate.allows("go")); // the server has not said yet
    gate.set(["python"]);
    assert.ok(gate.allows("python"));
    assert.ok(!gate.allows("go"));
    assert.match(gate.notice("go", "m") ?? "", /no suggestions in go files: m was trained on python only/);
    assert.equal(gate.notice("go", "m"), undefined);
    assert.ok(gate.notice("rust", "m"));
    assert.equal(gate.notice("python", "m"), undefined);
});

test("Open Settings searches for the setting the error is about", () => {
    assert.equal(settingsQuery("infill.serverPath is set to /x, which is not an executable file"), "infill.serverPath");
    assert.equal(settingsQuery("the infill language server was not found: set infill.serverPath, ..."), "infill.serverPath");
    assert.equal(settingsQuery("something else"), "@ext:infill.infill");
});

test("User settings are honoured: no infill setting is machine-scoped", () => {
    // A machine(-overridable) setting is left out of the User tab and ignored from User settings in
    // code-server and remote windows, without a word.
    for (const [key, spec] of Object.entries(PKG.contributes.configuration.properties as Record<string, { scope?: string }>)) {
        assert.ok(!String(spec.scope ?? "").startsWith("machine"), `${key} has scope ${spec.scope}`);
    }
});

test("a device the engine cannot use is rejected, and every setting is documented", () => {
    const device = PKG.contributes.configuration.properties["infill.device"];
    const re = new RegExp(device.pattern);
    for (const ok of ["auto", "cpu", "cuda", "cuda:1"]) assert.ok(re.test(ok), ok);
    assert.ok(!re.test("mps")); // infill/model/device.py: auto, cpu or cuda only
    for (const key of Object.keys(PKG.contributes.configuration.properties)) {
        assert.ok(README.includes("`" + key + "`"), `${key} is not in vscode-extension/README.md`);
    }
});

test("ghost text that would glue onto a word just accepted is dropped", () => {
    assert.ok(gluesOntoAcceptedWord("e", "n", true)); // edit_price + n
    assert.ok(!gluesOntoAcceptedWord("e", "(x)", true));
    assert.ok(!gluesOntoAcceptedWord("e", " = 1", true));
    assert.ok(!gluesOntoAcceptedWord("e", "n", false)); // typed, not accepted: completing a word is the point
    assert.ok(!gluesOntoAcceptedWord(" ", "n", true));
});

test("a document typed in while the server started is asked for ghost text once the server runs", () => {
    const edits = new EditsWhileStarting();
    edits.note("file:///a.py", false); // typed while starting
    edits.note("file:///b.py", true); // typed while running: VS Code asked the provider itself
    assert.ok(edits.take("file:///a.py"));
    assert.ok(!edits.take("file:///a.py")); // once
    edits.note("file:///b.py", false);
    assert.ok(!edits.take("file:///a.py")); // another editor is active: nothing to ask
    assert.ok(!edits.take("file:///b.py")); // and the server runs now: forgotten
    assert.ok(!edits.take(undefined));
});
