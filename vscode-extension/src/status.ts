// What the status bar item shows, from what the server says. Pure: no VS Code import.
//
// The server (lsp/server.py) reports the loaded model in a window/logMessage
// "infill: loaded <model> on <device> (<precision>)" and a failed load in a window/showMessage
// "infill: could not load the model: <reason>". If it also sends the notification
// `infill/status` ({state, model, device, latencyMs, message}), that is used as well.

export type Phase = "starting" | "loading" | "ready" | "restarting" | "error";

export interface StatusState {
    phase: Phase;
    model?: string;
    device?: string;
    /** the weights' number format, e.g. bfloat16 */
    precision?: string;
    /** the last completion's round trip as the editor saw it (ms) */
    latencyMs?: number;
    /** server-side fill time from infill/status, if sent (ms) */
    serverMs?: number;
    /** why, for error and restarting */
    message?: string;
}

const LOADED = /^(?:infill: )?loaded (.+) on (\S+)(?: \(([\w.]+)\))?\s*$/;
const LOAD_FAILED = /^(?:infill: )?could not load the model: ([\s\S]*)$/;

/** The change a server message implies, or undefined if it says nothing about the status. */
export function fromServerMessage(message: string): Partial<StatusState> | undefined {
    let m = LOADED.exec(message);
    if (m) return { phase: "ready", model: m[1], device: m[2], precision: m[3], message: undefined };
    m = LOAD_FAILED.exec(message);
    if (m) return { phase: "error", message: `could not load the model: ${m[1]}` };
    return undefined;
}

/** The change an `infill/status` notification implies (ignores what it does not understand). */
export function fromStatusNotification(params: unknown): Partial<StatusState> | undefined {
    if (typeof params !== "object" || params === null) return undefined;
    const p = params as Record<string, unknown>;
    const out: Partial<StatusState> = {};
    if (p.state === "loading" || p.state === "ready" || p.state === "error") out.phase = p.state;
    if (typeof p.model === "string") out.model = p.model;
    if (typeof p.device === "string") out.device = p.device;
    if (typeof p.latencyMs === "number" && Number.isFinite(p.latencyMs)) out.serverMs = p.latencyMs;
    if (typeof p.message === "string") out.message = p.message;
    return Object.keys(out).length ? out : undefined;
}

export interface Rendered {
    text: string;
    tooltip: string;
    error: boolean;
    /** what a click does */
    command: "infill.showLogs" | "infill.statusMenu";
}

export function formatLatency(ms: number): string {
    return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export function render(s: StatusState, enabled: boolean): Rendered {
    const details: string[] = [];
    if (s.model) details.push(`model: ${s.model}`);
    if (s.device) details.push(`device: ${s.device}`);
    if (s.precision) details.push(`precision: ${s.precision}`);
    if (s.latencyMs !== undefined) details.push(`last completion: ${formatLatency(s.latencyMs)}`);
    if (s.serverMs !== undefined) details.push(`last fill on the server: ${formatLatency(s.serverMs)}`);
    if (!enabled) details.push("completions are off (Infill: Toggle Completions)");
    switch (s.phase) {
        case "error":
            return { text: "$(error) infill", tooltip: `infill: ${s.message ?? "error"}\nClick to show the logs.`, error: true, command: "infill.showLogs" };
        case "restarting":
            return { text: "$(sync~spin) infill", tooltip: `infill: ${s.message ?? "restarting the server"}`, error: false, command: "infill.showLogs" };
        case "starting":
            return { text: "$(sync~spin) infill", tooltip: "infill: starting the server", error: false, command: "infill.statusMenu" };
        case "loading":
            return { text: "$(sync~spin) infill: loading", tooltip: "infill: loading the model", error: false, command: "infill.statusMenu" };
        case "ready": {
            const parts = [s.model ?? "model", s.device].filter(Boolean) as string[];
            if (s.latencyMs !== undefined) parts.push(formatLatency(s.latencyMs));
            const icon = enabled ? "$(sparkle)" : "$(circle-slash)";
            return { text: `${icon} ${parts.join(" · ")}`, tooltip: "infill\n" + details.join("\n"), error: false, command: "infill.statusMenu" };
        }
    }
}
