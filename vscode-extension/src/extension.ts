// The infill extension: finds and supervises `infill lsp`, wires it to VS Code through
// vscode-languageclient (inline completions come from its InlineCompletionItemFeature; with
// infill.drafts, their streamed drafts too: drafts.ts), and adds the commands Fill Holes, Fill
// Selection, Toggle Completions, Restart Server and Show Logs and a status bar item (model, device,
// last latency; an error state that leads to the logs).

import * as cp from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as vscode from "vscode";
import {
    CloseAction,
    DidChangeConfigurationNotification,
    ErrorAction,
    ExecuteCommandRequest,
    LanguageClient,
    LanguageClientOptions,
    LogMessageNotification,
    MessageType,
    RevealOutputChannelOn,
    ShowMessageNotification,
    State,
    WorkspaceEdit as LspWorkspaceEdit,
} from "vscode-languageclient/node";
import { Backoff } from "./backoff";
import { DiscoveryError, ServerCommand, discoverServer, expandPath } from "./discovery";
import { DraftedFills, Place, samePlace } from "./drafts";
import { affectsServer, configurationPayload, needsRestart, toServerOptions } from "./settings";
import { StatusState, fromServerMessage, fromStatusNotification, render } from "./status";
import { EditsWhileStarting, LanguageGate, gluesOntoAcceptedWord, serverLanguageIds, settingsQuery } from "./inline";

/** The LSP language ids of every language infill has a grammar for: languages.json, a copy of
 * grammars/languages.toml (`infill languages --json`; a test keeps the two the same). */
export const LANGUAGES: string[] = Object.values(
    JSON.parse(fs.readFileSync(path.join(__dirname, "..", "languages.json"), "utf8")) as Record<string, { lsp_ids: string[] }>,
).flatMap((language) => language.lsp_ids);
const SERVER_FILL_HOLES = "infill.fillHoles"; // the server's command (registered by the language client)
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 3_000;

/** The language client, minus its own error pop-ups: the supervisor below shows one clear message
 * (with Show Logs) per failure instead; everything is still logged to the Infill channel. */
class InfillLanguageClient extends LanguageClient {
    override error(message: string, data?: unknown, _showNotification?: boolean | "force"): void {
        super.error(message, data, false);
    }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function errorText(e: unknown): string {
    return e instanceof Error ? e.message : String(e);
}

async function isExecutable(file: string): Promise<boolean> {
    try {
        const st = await fs.promises.stat(file);
        if (!st.isFile()) return false;
        if (process.platform === "win32") return true;
        await fs.promises.access(file, fs.constants.X_OK);
        return true;
    } catch {
        return false;
    }
}

function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(message)), ms);
    });
    return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

class Infill implements vscode.Disposable {
    readonly out: vscode.LogOutputChannel;
    private readonly item: vscode.StatusBarItem;
    private state: StatusState = { phase: "starting" };
    private client: LanguageClient | undefined;
    private proc: cp.ChildProcess | undefined;
    private lastExit: string | undefined;
    private lastStderr: string | undefined;
    private generation = 0;
    private failedGeneration = -1;
    private readonly backoff = new Backoff();
    private restartTimer: NodeJS.Timeout | undefined;
    private readonly disposables: vscode.Disposable[] = [];
    private pythonListener: vscode.Disposable | undefined;
    private disposed = false;
    /** The languages the server's model knows (initialize result, then infill/languages). */
    private readonly gate = new LanguageGate();
    /** The ghost text last offered, and where an accepted one ended (to spot a glued next one). */
    private offered: { uri: string; version: number; offset: number; text: string } | undefined;
    private accepted: { uri: string; version: number; offset: number } | undefined;
    /** Documents typed in while the server was not running (VS Code asked no provider then). */
    private readonly editsWhileStarting = new EditsWhileStarting();
    /** The ghost-text fill under way and its streamed drafts (infill.drafts > 0). */
    private readonly drafts = new DraftedFills<unknown>({
        trigger: (place) => this.askAgainAt(place),
        drafting: (on) => void vscode.commands.executeCommand("setContext", "infill.drafting", on),
    });

    constructor(private readonly context: vscode.ExtensionContext) {
        this.out = vscode.window.createOutputChannel("Infill", { log: true });
        this.item = vscode.window.createStatusBarItem("infill.status", vscode.StatusBarAlignment.Right, 100);
        this.item.name = "infill";
        this.renderStatus();
        this.item.show();
        this.disposables.push(this.out, this.item);
        this.disposables.push(vscode.workspace.onDidChangeTextDocument((e) => {
            this.noteAccept(e);
            if (e.contentChanges.length) this.editsWhileStarting.note(e.document.uri.toString(), this.client?.state === State.Running);
        }));
    }

    /** An edit that inserts exactly the ghost text last offered, where it was offered: an accept. */
    private noteAccept(e: vscode.TextDocumentChangeEvent): void {
        const o = this.offered;
        if (!o || e.document.uri.toString() !== o.uri || e.contentChanges.length !== 1) return;
        const c = e.contentChanges[0];
        if (c.rangeLength === 0 && c.rangeOffset === o.offset && c.text === o.text) {
            this.accepted = { uri: o.uri, version: e.document.version, offset: o.offset + o.text.length };
        }
        this.offered = undefined;
    }

    /** Whether the request's language is served; the first refusal per language says so once. */
    private serves(document: vscode.TextDocument): boolean {
        if (this.gate.allows(document.languageId)) return true;
        const notice = this.gate.notice(document.languageId, this.state.model);
        if (notice) {
            this.out.info(notice);
            void vscode.window.showInformationMessage(notice);
        }
        return false;
    }

    /** Have VS Code show what is new at `place` (a draft, or the final fill), if its active editor
     * is still there. It must be hidden first: asked again at the same version and position, VS
     * Code (1.139) keeps the suggestion it shows (an explicit request) or reuses its last answer (an
     * automatic one); hiding clears both, at the cost of a blink. */
    private askAgainAt(place: Place): void {
        const editor = vscode.window.activeTextEditor;
        const client = this.client;
        if (!editor || !client || !editor.selection.isEmpty) return;
        const at = editor.selection.active;
        const here = { uri: client.code2ProtocolConverter.asUri(editor.document.uri), version: editor.document.version, line: at.line, character: at.character };
        if (!samePlace(here, place)) return;
        void (async () => {
            await vscode.commands.executeCommand("editor.action.inlineSuggest.hide");
            await vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
        })();
    }

    /** Escape while a draft is shown: stop its fill (no more drafts), and hide it. */
    dismissDraft(): void {
        this.drafts.dismiss();
        void vscode.commands.executeCommand("editor.action.inlineSuggest.hide");
    }

    // -- settings ---------------------------------------------------------------------------

    private config(): vscode.WorkspaceConfiguration {
        return vscode.workspace.getConfiguration("infill");
    }

    get enabled(): boolean {
        return this.config().get<boolean>("enable", true);
    }

    /** Whether the server streams ghost text's drafts (infill.drafts: a draft every N steps). */
    get draftsOn(): boolean {
        return (this.config().get<number>("drafts", 0) ?? 0) > 0;
    }

    private workspaceFolder(): string | undefined {
        return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    }

    serverOptions() {
        const c = this.config();
        return toServerOptions((k) => c.get(k), { home: os.homedir(), workspaceFolder: this.workspaceFolder(), env: process.env });
    }

    // -- status bar -------------------------------------------------------------------------

    private setState(change: Partial<StatusState>): void {
        this.state = { ...this.state, ...change };
        this.renderStatus();
    }

    private renderStatus(): void {
        const r = render(this.state, this.enabled);
        this.item.text = r.text;
        this.item.tooltip = r.tooltip;
        this.item.command = r.command;
        this.item.backgroundColor = r.error ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    }

    recordLatency(ms: number): void {
        this.setState({ latencyMs: ms });
    }

    private onServerMessage(text: string): void {
        const change = fromServerMessage(text);
        if (change) this.setState(change);
    }

    private trace: vscode.LogOutputChannel | undefined;

    /** The channel for infill.trace.server: a plain channel behind the LogOutputChannel interface,
     * because a real one would drop the client's trace-level lines unless its level is Trace. */
    private traceChannel(): vscode.LogOutputChannel {
        if (!this.trace) {
            const ch = vscode.window.createOutputChannel("Infill LSP Trace");
            const line = (level: string) => (message: string | Error, ...args: unknown[]) =>
                ch.appendLine(`${new Date().toISOString()} [${level}] ${message instanceof Error ? message.stack ?? message.message : message}${args.length ? " " + JSON.stringify(args) : ""}`);
            const levels = new vscode.EventEmitter<vscode.LogLevel>();
            this.trace = {
                name: ch.name,
                logLevel: vscode.LogLevel.Trace,
                onDidChangeLogLevel: levels.event,
                trace: line("trace"), debug: line("debug"), info: line("info"), warn: line("warn"), error: line("error"),
                append: (v: string) => ch.append(v),
                appendLine: (v: string) => ch.appendLine(v),
                replace: (v: string) => ch.replace(v),
                clear: () => ch.clear(),
                show: (a?: unknown, b?: boolean) => (typeof a === "boolean" ? ch.show(a) : ch.show(a as vscode.ViewColumn | undefined, b)),
                hide: () => ch.hide(),
                dispose: () => { ch.dispose(); levels.dispose(); },
            } as vscode.LogOutputChannel;
            this.disposables.push(this.trace);
        }
        return this.trace;
    }

    // -- discovery --------------------------------------------------------------------------

    private async pythonInterpreter(): Promise<string | undefined> {
        const ext = vscode.extensions.getExtension("ms-python.python");
        if (!ext) {
            this.out.info("server discovery: the Python extension (ms-python.python) is not installed; trying python.defaultInterpreterPath, then the workspace's .venv and venv");
            return this.interpreterWithoutPythonExtension();
        }
        // eslint-disable-next-line @typescript-eslint/no-explicit-any
        const api: any = ext.isActive ? ext.exports : await ext.activate();
        const resource = vscode.window.activeTextEditor?.document.uri ?? vscode.workspace.workspaceFolders?.[0]?.uri;
        const envs = api?.environments;
        if (envs?.getActiveEnvironmentPath) {
            if (!this.pythonListener && envs.onDidChangeActiveEnvironmentPath) {
                this.pythonListener = envs.onDidChangeActiveEnvironmentPath(() => {
                    if (!this.config().get<string>("serverPath")) {
                        this.out.info("the selected Python environment changed: restarting the server");
                        void this.start(true);
                    }
                });
            }
            const active = envs.getActiveEnvironmentPath(resource);
            if (!active?.path) return undefined;
            const resolved = envs.resolveEnvironment ? await envs.resolveEnvironment(active) : undefined;
            return resolved?.executable?.uri?.fsPath ?? active.path;
        }
        const details = api?.settings?.getExecutionDetails?.(resource); // older API
        return details?.execPath?.[0];
    }

    /** python.defaultInterpreterPath if set to a file, else <workspace>/.venv or venv. */
    private async interpreterWithoutPythonExtension(): Promise<string | undefined> {
        const win = process.platform === "win32";
        const configured = (vscode.workspace.getConfiguration("python").get<string>("defaultInterpreterPath") ?? "").trim();
        if (configured && !["python", "python3", "py"].includes(configured)) {
            const file = expandPath(configured, os.homedir(), this.workspaceFolder(), process.env);
            if (await isExecutable(file)) return file;
            this.out.info(`server discovery: python.defaultInterpreterPath = ${file} is not an executable file`);
        }
        const ws = this.workspaceFolder();
        for (const name of ws ? [".venv", "venv"] : []) {
            const file = win ? path.join(ws!, name, "Scripts", "python.exe") : path.join(ws!, name, "bin", "python");
            if (await isExecutable(file)) return file;
        }
        return undefined;
    }

    private discover(): Promise<ServerCommand> {
        const c = this.config();
        return discoverServer({
            setting: (c.get<string>("serverPath") ?? "").trim(),
            extraArgs: c.get<string[]>("serverArgs") ?? [],
            pythonInterpreter: () => this.pythonInterpreter(),
            pathEnv: process.env.PATH,
            pathExt: process.env.PATHEXT,
            platform: process.platform,
            isExecutable,
            home: os.homedir(),
            workspaceFolder: this.workspaceFolder(),
            log: (line) => this.out.info(line),
        });
    }

    // -- the server's life --------------------------------------------------------------------

    /** (Re)start the server. `userAsked`: a person asked (command, settings): forget past failures. */
    async start(userAsked = false): Promise<void> {
        if (this.disposed) return;
        if (this.restartTimer) clearTimeout(this.restartTimer);
        this.restartTimer = undefined;
        if (userAsked) this.backoff.reset();
        const gen = ++this.generation;
        await this.stopClient();
        if (gen !== this.generation) return;
        this.setState({ phase: "starting", message: undefined });

        let cmd: ServerCommand;
        try {
            cmd = await this.discover();
        } catch (e) {
            if (gen !== this.generation) return;
            const tried = e instanceof DiscoveryError ? e.tried : [];
            for (const t of tried) this.out.warn(`  tried ${t}`);
            this.failed(gen, errorText(e), false, true);
            return;
        }
        if (gen !== this.generation) return;

        const clientOptions: LanguageClientOptions = {
            documentSelector: LANGUAGES.flatMap((language) => [{ scheme: "file", language }, { scheme: "untitled", language }]),
            initializationOptions: () => {
                const options = this.serverOptions();
                this.out.info(`initializationOptions: ${JSON.stringify(options)}`);
                return options;
            },
            outputChannel: this.out,
            traceOutputChannel: this.traceChannel(),
            revealOutputChannelOn: RevealOutputChannelOn.Never,
            initializationFailedHandler: (error) => {
                this.out.error(`initialize failed: ${errorText(error)}`);
                return false;
            },
            errorHandler: {
                error: (_error, _message, count) => ({ action: (count ?? 0) >= 3 ? ErrorAction.Shutdown : ErrorAction.Continue, handled: true }),
                closed: () => {
                    this.onClosed(gen, client.state === State.Running);
                    return { action: CloseAction.DoNotRestart, handled: true };
                },
            },
            middleware: {
                provideInlineCompletionItems: async (document, position, context, token, next) => {
                    if (!this.enabled || !this.serves(document)) return undefined;
                    const offset = document.offsetAt(position);
                    const a = this.accepted;
                    const justAccepted = !!a && a.uri === document.uri.toString() && a.version === document.version && a.offset === offset;
                    const charBefore = position.character > 0 ? document.lineAt(position.line).text.charAt(position.character - 1) : "";
                    const t0 = Date.now();
                    let result: vscode.InlineCompletionItem[] | vscode.InlineCompletionList | null | undefined;
                    let ms: number | undefined;
                    if (this.draftsOn) {
                        // One fill per place, outliving this call; its drafts answer the calls at that place until it ends.
                        const place = { uri: client.code2ProtocolConverter.asUri(document.uri), version: document.version, line: position.line, character: position.character };
                        const answer = await this.drafts.provide(place, token, () => {
                            const source = new vscode.CancellationTokenSource();
                            const pending = Promise.resolve(next(document, position, context, source.token));
                            void pending.finally(() => source.dispose());
                            return { result: pending, cancel: () => source.cancel() };
                        });
                        if (answer.kind === "none") return undefined;
                        if (answer.kind === "draft") result = [new vscode.InlineCompletionItem(answer.text, new vscode.Range(position, position))];
                        else [result, ms] = [answer.value as typeof result, answer.ms];
                    } else {
                        result = await next(document, position, context, token);
                        ms = Date.now() - t0;
                    }
                    let items = Array.isArray(result) ? result : result?.items;
                    if (items && justAccepted) {
                        const kept = items.filter((i) => !gluesOntoAcceptedWord(charBefore, typeof i.insertText === "string" ? i.insertText : i.insertText.value, true));
                        if (kept.length < items.length) this.out.info(`dropped ghost text that would glue onto the word just accepted`);
                        items = kept;
                    }
                    if (items && items.length && !token.isCancellationRequested) {
                        if (ms !== undefined) this.recordLatency(ms); // a final fill's, not a draft's
                        const first = items[0];
                        if (typeof first.insertText === "string") {
                            this.offered = { uri: document.uri.toString(), version: document.version, offset, text: first.insertText };
                        }
                    }
                    return items ?? result;
                },
                provideCompletionItem: async (document, position, context, token, next) => {
                    if (!this.enabled && context.triggerKind !== vscode.CompletionTriggerKind.Invoke) return undefined;
                    if (!this.serves(document)) return undefined;
                    return next(document, position, context, token);
                },
                workspace: {
                    // the pull model: answer the "infill" section with the server's options only
                    configuration: async (params, token, next) => {
                        const answer = await next(params, token);
                        if (!Array.isArray(answer)) return answer;
                        return params.items.map((item, i) => (item.section === "infill" ? this.serverOptions() : answer[i]));
                    },
                },
            },
        };

        this.lastExit = undefined;
        this.lastStderr = undefined;
        const client = new InfillLanguageClient("infill", "infill", () => this.spawn(cmd, gen), clientOptions);
        this.client = client;
        client.onNotification(LogMessageNotification.type, (p) => {
            const text = p.message;
            if (p.type === MessageType.Error) this.out.error(text);
            else if (p.type === MessageType.Warning) this.out.warn(text);
            else if (p.type === MessageType.Info) this.out.info(text);
            else this.out.debug(text);
            this.onServerMessage(text);
        });
        client.onNotification(ShowMessageNotification.type, (p) => {
            this.onServerMessage(p.message);
            if (p.type === MessageType.Error) {
                this.out.error(p.message);
                this.notifyError(p.message, false);
            } else if (p.type === MessageType.Warning) {
                this.out.warn(p.message);
                void vscode.window.showWarningMessage(p.message, "Show Logs").then((a) => a && this.showLogs());
            } else {
                this.out.info(p.message);
                void vscode.window.showInformationMessage(p.message);
            }
        });
        client.onNotification("infill/languages", (p: unknown) => this.gate.set(serverLanguageIds(p) ?? this.gate.known));
        client.onNotification("infill/draft", (p: unknown) => this.drafts.onDraft(p));
        client.onNotification("infill/status", (p: unknown) => {
            const change = fromStatusNotification(p);
            if (change) this.setState(change);
        });

        this.out.info(`starting ${cmd.command} ${cmd.args.join(" ")}`);
        this.backoff.started(Date.now());
        try {
            await withTimeout(client.start(), START_TIMEOUT_MS, `the server did not answer initialize within ${START_TIMEOUT_MS / 1000} s`);
        } catch (e) {
            if (gen !== this.generation) return;
            await sleep(200); // the exit code comes a moment after the pipes close
            const what = `"${cmd.command} ${cmd.args.join(" ")}"`;
            const said = this.lastStderr ? `: ${this.lastStderr}` : "";
            this.failed(gen, this.lastExit ? `${what} exited while starting (${this.lastExit})${said}` : `could not start ${what}: ${errorText(e)}`, true, false);
            return;
        }
        if (gen !== this.generation) return;
        this.gate.set(serverLanguageIds(client.initializeResult));
        if (this.gate.known) this.out.info(`the model knows: ${this.gate.known.join(", ")}; other languages get no suggestions`);
        if (this.state.phase === "starting") this.setState({ phase: "loading" });
        this.out.info(`server started (${cmd.source}); waiting for the model`);
        const active = vscode.window.activeTextEditor?.document;
        if (this.editsWhileStarting.take(active?.uri.toString()) && active && this.enabled && this.gate.allows(active.languageId)) {
            this.out.info("the active document was typed in while the server started: asking for its ghost text");
            void (async () => {
                try {
                    await vscode.commands.executeCommand("editor.action.inlineSuggest.trigger", { explicit: false, providerId: "infill.infill:*" });
                    this.out.info("drafts: trigger ok");
                } catch (e) {
                    this.out.info(`drafts: trigger failed: ${errorText(e)}`);
                }
            })();
        }
    }

    private spawn(cmd: ServerCommand, gen: number): Promise<cp.ChildProcess> {
        return new Promise((resolve, reject) => {
            const proc = cp.spawn(cmd.command, cmd.args, {
                cwd: this.workspaceFolder() ?? os.homedir(),
                env: process.env,
                shell: process.platform === "win32" && /\.(cmd|bat)$/i.test(cmd.command),
            });
            this.proc = proc;
            let tail = "";
            proc.stderr?.on("data", (chunk: Buffer) => {
                // the last line the server wrote on stderr, for the crash message (the full text is in the log)
                tail = (tail + chunk.toString()).slice(-4000);
                const lines = tail.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
                if (gen === this.generation && lines.length) this.lastStderr = lines[lines.length - 1].slice(0, 300);
            });
            proc.once("spawn", () => resolve(proc));
            proc.once("error", (e) => {
                this.lastExit = `could not run it: ${e.message}`;
                this.out.error(`${cmd.command}: ${e.message}`);
                reject(e);
            });
            proc.once("exit", (code, signal) => {
                this.lastExit = signal ? `killed by ${signal}` : `exit code ${code}`;
                if (gen === this.generation) this.out.warn(`the server process exited (${this.lastExit})`);
            });
        });
    }

    private onClosed(gen: number, wasRunning: boolean): void {
        // The connection closed, not on our stop: a crash. The exit event may come just after the
        // close; wait a moment for the exit code. During start, start()'s own catch usually
        // reports it first (with more detail); this is the fallback.
        const reason = () => `the language server ${wasRunning ? "stopped" : "exited while starting"}${this.lastExit ? ` (${this.lastExit})` : ""}${this.lastStderr ? `: ${this.lastStderr}` : ""}`;
        setTimeout(() => this.failed(gen, reason(), true, false), wasRunning ? 200 : 1500);
    }

    /** One failure of generation `gen`: restart with backoff, or (retry false / too many) an error state. */
    private failed(gen: number, reason: string, retry: boolean, settingsProblem: boolean): void {
        if (gen !== this.generation || this.failedGeneration === gen || this.disposed) return;
        this.failedGeneration = gen;
        this.out.error(reason);
        const delay = retry ? this.backoff.failed(Date.now()) : undefined;
        if (delay === undefined) {
            const tail = retry ? ` It failed ${this.backoff.options.maxAttempts + 1} times in a row; use Infill: Restart Server once it is fixed.` : "";
            this.setState({ phase: "error", message: reason + (retry ? " (not restarting)" : "") });
            this.notifyError(`infill: ${reason}.${tail}`, settingsProblem);
            return;
        }
        this.setState({ phase: "restarting", message: `${reason}; restarting in ${(delay / 1000).toFixed(0)} s` });
        this.out.info(`restarting the server in ${delay} ms (attempt ${this.backoff.attempts} of ${this.backoff.options.maxAttempts})`);
        if (this.backoff.attempts === 1) {
            this.notifyError(`infill: ${reason}. Restarting in ${(delay / 1000).toFixed(0)} s.`, false);
        }
        this.restartTimer = setTimeout(() => {
            this.restartTimer = undefined;
            void this.start(false);
        }, delay);
    }

    private notifyError(message: string, settingsProblem: boolean): void {
        const actions = settingsProblem ? ["Show Logs", "Open Settings"] : ["Show Logs", "Restart Server"];
        void vscode.window.showErrorMessage(message, ...actions).then((a) => {
            if (a === "Show Logs") this.showLogs();
            else if (a === "Open Settings") void vscode.commands.executeCommand("workbench.action.openSettings", settingsQuery(message));
            else if (a === "Restart Server") void this.start(true);
        });
    }

    private async stopClient(): Promise<void> {
        const client = this.client;
        const proc = this.proc;
        this.client = undefined;
        this.proc = undefined;
        if (client) {
            try {
                if (client.state === State.Running) await withTimeout(client.stop(STOP_TIMEOUT_MS), STOP_TIMEOUT_MS + 1000, "stop timed out");
                await withTimeout(client.dispose(STOP_TIMEOUT_MS), STOP_TIMEOUT_MS + 1000, "dispose timed out");
            } catch (e) {
                this.out.info(`stopping the old client: ${errorText(e)}`);
            }
        }
        if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill();
    }

    // -- commands -----------------------------------------------------------------------------

    showLogs(): void {
        this.out.show(true);
    }

    async toggle(): Promise<void> {
        const next = !this.enabled;
        await this.config().update("enable", next, vscode.ConfigurationTarget.Global);
        void vscode.window.setStatusBarMessage(`infill: completions ${next ? "on" : "off"}`, 2000);
        this.renderStatus();
    }

    /** Fill every <FILL> hole in the document, or in `range`, as one edit. */
    async fillHoles(range: vscode.Range | undefined): Promise<void> {
        const editor = vscode.window.activeTextEditor;
        if (!editor) {
            void vscode.window.showInformationMessage("infill: open a file with <FILL> holes first.");
            return;
        }
        const client = this.client;
        if (!client || client.state !== State.Running) {
            void vscode.window.showErrorMessage("infill: the language server is not running.", "Show Logs", "Restart Server").then((a) => {
                if (a === "Show Logs") this.showLogs();
                else if (a === "Restart Server") void this.start(true);
            });
            return;
        }
        const document = editor.document;
        if (!LANGUAGES.includes(document.languageId)) {
            void vscode.window.showInformationMessage(`infill: ${document.languageId} files are not handled.`);
            return;
        }
        const arg: Record<string, unknown> = { uri: client.code2ProtocolConverter.asUri(document.uri), apply: false };
        if (range && !range.isEmpty) arg.range = client.code2ProtocolConverter.asRange(range);
        const version = document.version;
        const t0 = Date.now();
        const result = await vscode.window.withProgress(
            { location: vscode.ProgressLocation.Notification, title: "infill: filling holes…", cancellable: true },
            async (_progress, token) => {
                try {
                    return (await client.sendRequest(ExecuteCommandRequest.type, { command: SERVER_FILL_HOLES, arguments: [arg] }, token)) as LspWorkspaceEdit | null;
                } catch (e) {
                    if (!token.isCancellationRequested) {
                        this.out.error(`fill holes: ${errorText(e)}`);
                        void vscode.window.showErrorMessage(`infill: filling holes failed: ${errorText(e)}`, "Show Logs").then((a) => a && this.showLogs());
                    }
                    return null;
                }
            },
        );
        if (!result) return; // no holes, cancelled or failed: the server said why
        if (document.version !== version) {
            void vscode.window.showWarningMessage("infill: the document changed while filling; nothing was applied.");
            return;
        }
        const edit = await client.protocol2CodeConverter.asWorkspaceEdit(result);
        const ok = await vscode.workspace.applyEdit(edit);
        this.recordLatency(Date.now() - t0);
        if (!ok) void vscode.window.showWarningMessage("infill: the edit could not be applied.");
    }

    async statusMenu(): Promise<void> {
        const items: (vscode.QuickPickItem & { run: () => unknown })[] = [
            { label: "$(edit) Fill Holes", run: () => this.fillHoles(undefined) },
            { label: this.enabled ? "$(circle-slash) Turn completions off" : "$(sparkle) Turn completions on", run: () => this.toggle() },
            { label: "$(debug-restart) Restart Server", run: () => this.start(true) },
            { label: "$(output) Show Logs", run: () => this.showLogs() },
            { label: "$(gear) Settings", run: () => vscode.commands.executeCommand("workbench.action.openSettings", "infill.") },
        ];
        const pick = await vscode.window.showQuickPick(items, { title: "infill" });
        if (pick) await pick.run();
    }

    onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
        if (!e.affectsConfiguration("infill")) return;
        const affects = (s: string) => e.affectsConfiguration(s);
        if (needsRestart(affects) || (this.state.phase === "error" && this.client?.state !== State.Running)) {
            this.out.info("server settings changed: restarting the server");
            void this.start(true);
            return;
        }
        if (affectsServer(affects) && this.client?.state === State.Running) {
            const options = this.serverOptions();
            this.out.info(`sending the changed options: ${JSON.stringify(options)}`);
            if (affects("infill.modelPath") || affects("infill.device")) this.setState({ phase: "loading", message: undefined });
            void this.client.sendNotification(DidChangeConfigurationNotification.type, { settings: configurationPayload(options) });
        }
        this.renderStatus();
    }

    async dispose(): Promise<void> {
        this.disposed = true;
        if (this.restartTimer) clearTimeout(this.restartTimer);
        this.generation++;
        this.pythonListener?.dispose();
        await this.stopClient();
        for (const d of this.disposables) d.dispose();
    }
}

let infill: Infill | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
    const it = new Infill(context);
    infill = it;
    context.subscriptions.push(
        vscode.commands.registerCommand("infill.fillHolesInDocument", () => it.fillHoles(undefined)),
        vscode.commands.registerCommand("infill.fillSelection", () => it.fillHoles(vscode.window.activeTextEditor?.selection)),
        vscode.commands.registerCommand("infill.toggle", () => it.toggle()),
        vscode.commands.registerCommand("infill.restartServer", () => it.start(true)),
        vscode.commands.registerCommand("infill.showLogs", () => it.showLogs()),
        vscode.commands.registerCommand("infill.statusMenu", () => it.statusMenu()),
        vscode.commands.registerCommand("infill.dismissDraft", () => it.dismissDraft()),
        vscode.workspace.onDidChangeConfiguration((e) => it.onConfigurationChanged(e)),
    );
    void it.start(true);
}

export async function deactivate(): Promise<void> {
    await infill?.dispose();
    infill = undefined;
}
