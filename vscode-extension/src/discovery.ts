// Where `infill lsp` comes from: the setting infill.serverPath, then the selected Python
// environment, then PATH. Pure logic: the file system, the Python extension and the log are
// passed in, so the order can be unit-tested without VS Code.

import * as path from "path";

export interface ServerCommand {
    command: string;
    args: string[];
    /** which step found it: "setting" | "python" | "path" */
    source: "setting" | "python" | "path";
}

export interface DiscoveryInputs {
    /** infill.serverPath, already trimmed ("" when unset) */
    setting: string;
    /** infill.serverArgs, appended after `lsp` */
    extraArgs: string[];
    /** the interpreter of the selected Python environment, or undefined (no Python extension, none selected) */
    pythonInterpreter: () => Promise<string | undefined>;
    /** process.env.PATH */
    pathEnv: string | undefined;
    /** process.env.PATHEXT (Windows) */
    pathExt?: string | undefined;
    platform: NodeJS.Platform;
    /** a regular file we may run */
    isExecutable: (file: string) => Promise<boolean>;
    /** values for ~ and ${workspaceFolder} */
    home: string;
    workspaceFolder?: string;
    log: (line: string) => void;
}

export class DiscoveryError extends Error {
    constructor(message: string, readonly tried: string[]) {
        super(message);
    }
}

/** `~`, `~/x`, `${workspaceFolder}`, `${userHome}` and `${env:NAME}` expanded. */
export function expandPath(value: string, home: string, workspaceFolder: string | undefined, env: Record<string, string | undefined> = {}): string {
    let out = value.replace(/\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g, (whole, name: string, envName?: string) => {
        if (name === "workspaceFolder") return workspaceFolder ?? whole;
        if (name === "userHome") return home;
        return env[envName ?? ""] ?? "";
    });
    if (out === "~") out = home;
    else if (out.startsWith("~/") || out.startsWith("~\\")) out = path.join(home, out.slice(2));
    return out;
}

function executableNames(name: string, platform: NodeJS.Platform, pathExt: string | undefined): string[] {
    if (platform !== "win32") return [name];
    const exts = (pathExt ?? ".COM;.EXE;.BAT;.CMD").split(";").filter(Boolean).map((e) => e.toLowerCase());
    return [...exts.map((e) => name + e), name];
}

/** The scripts folder next to a Python interpreter (bin/ on POSIX, Scripts\ on Windows venvs). */
export function scriptDirs(interpreter: string, platform: NodeJS.Platform): string[] {
    const p = platform === "win32" ? path.win32 : path.posix;
    const dir = p.dirname(interpreter);
    if (platform === "win32") {
        // a venv's python.exe lives in Scripts\ already; a base install has Scripts\ beside python.exe
        return p.basename(dir).toLowerCase() === "scripts" ? [dir] : [p.join(dir, "Scripts"), dir];
    }
    return [dir];
}

/** The command that starts the server; DiscoveryError (with every step tried) if none is found. */
export async function discoverServer(inp: DiscoveryInputs): Promise<ServerCommand> {
    const args = ["lsp", ...inp.extraArgs];
    const tried: string[] = [];
    const p = inp.platform === "win32" ? path.win32 : path.posix;

    // 1. the setting
    if (inp.setting) {
        const file = expandPath(inp.setting, inp.home, inp.workspaceFolder);
        inp.log(`server discovery: 1. setting infill.serverPath = ${file}`);
        if (await inp.isExecutable(file)) {
            inp.log(`server discovery: using ${file} (from infill.serverPath)`);
            return { command: file, args, source: "setting" };
        }
        tried.push(`infill.serverPath: ${file} (not an executable file)`);
        inp.log(`server discovery: ${file} is not an executable file; the setting wins, so discovery stops here`);
        throw new DiscoveryError(`infill.serverPath is set to ${file}, which is not an executable file`, tried);
    }
    inp.log("server discovery: 1. setting infill.serverPath is empty");

    // 2. the selected Python environment
    let interpreter: string | undefined;
    try {
        interpreter = await inp.pythonInterpreter();
    } catch (e) {
        inp.log(`server discovery: 2. the Python extension failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (interpreter) {
        inp.log(`server discovery: 2. selected Python environment: ${interpreter}`);
        for (const dir of scriptDirs(interpreter, inp.platform)) {
            for (const name of executableNames("infill", inp.platform, inp.pathExt)) {
                const file = p.join(dir, name);
                if (await inp.isExecutable(file)) {
                    inp.log(`server discovery: using ${file} (from the selected Python environment)`);
                    return { command: file, args, source: "python" };
                }
                tried.push(`Python environment: ${file}`);
            }
        }
        inp.log("server discovery: no infill script in that environment (pip install infill there)");
    } else {
        inp.log("server discovery: 2. no selected Python environment (the Python extension is absent or has none)");
        tried.push("Python environment: none selected");
    }

    // 3. PATH
    const sep = inp.platform === "win32" ? ";" : ":";
    const dirs = (inp.pathEnv ?? "").split(sep).filter(Boolean);
    inp.log(`server discovery: 3. searching PATH (${dirs.length} folders)`);
    for (const dir of dirs) {
        for (const name of executableNames("infill", inp.platform, inp.pathExt)) {
            const file = p.join(dir, name);
            if (await inp.isExecutable(file)) {
                inp.log(`server discovery: using ${file} (from PATH)`);
                return { command: file, args, source: "path" };
            }
        }
    }
    tried.push("PATH: no infill executable");
    inp.log(`server discovery: infill is not on PATH (${dirs.join(sep)})`);
    throw new DiscoveryError("the infill language server was not found: set infill.serverPath, select a Python environment with infill installed, or put infill on PATH", tried);
}
