import * as assert from "node:assert/strict";
import { test } from "node:test";
import { DiscoveryError, DiscoveryInputs, discoverServer, expandPath, scriptDirs } from "../discovery";

function inputs(over: Partial<DiscoveryInputs> & { files?: string[] }): DiscoveryInputs & { lines: string[] } {
    const files = new Set(over.files ?? []);
    const lines: string[] = [];
    return {
        setting: "",
        extraArgs: [],
        pythonInterpreter: async () => undefined,
        pathEnv: "/usr/local/bin:/usr/bin",
        platform: "linux",
        isExecutable: async (f) => files.has(f),
        home: "/home/u",
        workspaceFolder: "/ws",
        log: (l) => lines.push(l),
        lines,
        ...over,
    };
}

test("the setting wins over the Python environment and PATH", async () => {
    const inp = inputs({ setting: "~/bin/infill", pythonInterpreter: async () => "/venv/bin/python", files: ["/home/u/bin/infill", "/venv/bin/infill", "/usr/bin/infill"] });
    const got = await discoverServer(inp);
    assert.deepEqual(got, { command: "/home/u/bin/infill", args: ["lsp"], source: "setting" });
    assert.match(inp.lines.join("\n"), /1\. setting infill\.serverPath = \/home\/u\/bin\/infill/);
});

test("a setting that points nowhere is an error, not a silent fallback", async () => {
    const inp = inputs({ setting: "${workspaceFolder}/.venv/bin/infill", files: ["/usr/bin/infill"] });
    await assert.rejects(discoverServer(inp), (e: unknown) => e instanceof DiscoveryError && /\/ws\/\.venv\/bin\/infill/.test(e.message));
});

test("then the selected Python environment", async () => {
    let asked = 0;
    const inp = inputs({ pythonInterpreter: async () => { asked++; return "/venv/bin/python3"; }, files: ["/venv/bin/infill", "/usr/bin/infill"], extraArgs: ["--threads", "2"] });
    const got = await discoverServer(inp);
    assert.equal(asked, 1);
    assert.deepEqual(got, { command: "/venv/bin/infill", args: ["lsp", "--threads", "2"], source: "python" });
    const log = inp.lines.join("\n");
    assert.ok(log.indexOf("1. setting") < log.indexOf("2. selected Python environment: /venv/bin/python3"));
});

test("then PATH, in PATH order, when the environment has no infill", async () => {
    const inp = inputs({ pythonInterpreter: async () => "/venv/bin/python", files: ["/usr/bin/infill", "/usr/local/bin/infill"] });
    const got = await discoverServer(inp);
    assert.deepEqual(got, { command: "/usr/local/bin/infill", args: ["lsp"], source: "path" });
    assert.match(inp.lines.join("\n"), /no infill script in that environment/);
    assert.match(inp.lines.join("\n"), /3\. searching PATH \(2 folders\)/);
});

test("a failing Python extension is logged and skipped", async () => {
    const inp = inputs({ pythonInterpreter: async () => { throw new Error("boom"); }, files: ["/usr/bin/infill"] });
    const got = await discoverServer(inp);
    assert.equal(got.source, "path");
    assert.match(inp.lines.join("\n"), /the Python extension failed: boom/);
});

test("nothing found: DiscoveryError listing every step", async () => {
    const inp = inputs({ pathEnv: "" });
    await assert.rejects(discoverServer(inp), (e: unknown) => {
        assert.ok(e instanceof DiscoveryError);
        assert.match(e.message, /not found/);
        assert.deepEqual(e.tried, ["Python environment: none selected", "PATH: no infill executable"]);
        return true;
    });
});

test("Windows: Scripts folder and PATHEXT", async () => {
    const inp = inputs({
        platform: "win32", pathEnv: "C:\\tools;C:\\bin", pathExt: ".EXE;.CMD",
        pythonInterpreter: async () => "C:\\venv\\Scripts\\python.exe", files: ["C:\\venv\\Scripts\\infill.exe"],
    });
    assert.deepEqual(await discoverServer(inp), { command: "C:\\venv\\Scripts\\infill.exe", args: ["lsp"], source: "python" });
    const inp2 = inputs({ platform: "win32", pathEnv: "C:\\tools;C:\\bin", pathExt: ".EXE;.CMD", files: ["C:\\bin\\infill.cmd"] });
    assert.deepEqual(await discoverServer(inp2), { command: "C:\\bin\\infill.cmd", args: ["lsp"], source: "path" });
    assert.deepEqual(scriptDirs("C:\\Python311\\python.exe", "win32"), ["C:\\Python311\\Scripts", "C:\\Python311"]);
});

test("expandPath", () => {
    assert.equal(expandPath("~", "/h", undefined), "/h");
    assert.equal(expandPath("~/m", "/h", undefined), "/h/m");
    assert.equal(expandPath("${workspaceFolder}/m", "/h", "/ws"), "/ws/m");
    assert.equal(expandPath("${workspaceFolder}/m", "/h", undefined), "${workspaceFolder}/m");
    assert.equal(expandPath("${userHome}/x/${env:MODEL}", "/h", undefined, { MODEL: "tiny" }), "/h/x/tiny");
    assert.equal(expandPath("/abs/~x", "/h", undefined), "/abs/~x");
});
