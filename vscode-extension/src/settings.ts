// The `infill.*` settings that belong to the server (lsp/options.py), as the object sent
// in initializationOptions and in workspace/didChangeConfiguration. Client-only settings
// (enable, serverPath, serverArgs, trace) never reach the server: it would call them unknown.

import { expandPath } from "./discovery";

/** The server's options, by their camelCase names (lsp/options.py). */
export interface ServerOptions {
    modelPath?: string;
    device?: string;
    maxTokens?: number;
    steps?: number;
    threshold?: number;
    debounceMs?: number;
    constrained?: boolean;
    retry?: boolean;
    feedbackFile?: string;
    minScore?: number;
    cursorCandidates?: number;
    drafts?: number;
    relatedFiles?: boolean;
}

export const SERVER_KEYS: readonly (keyof ServerOptions)[] = [
    "modelPath", "device", "maxTokens", "steps", "threshold", "debounceMs", "constrained", "retry", "feedbackFile", "minScore",
    "cursorCandidates", "drafts", "relatedFiles",
];

/** Settings whose change means a new server process (the others are sent to the running one). */
export const RESTART_KEYS = ["serverPath", "serverArgs"] as const;

export interface Expansion {
    home: string;
    workspaceFolder?: string;
    env?: Record<string, string | undefined>;
}

/**
 * The options to send, from a getter of `infill.<key>` values. Unset, empty, null and
 * out-of-type values are left out so that the server keeps its default (it would otherwise
 * warn about them); path values have `~` and `${workspaceFolder}` expanded.
 */
export function toServerOptions(get: (key: string) => unknown, exp: Expansion): ServerOptions {
    const out: ServerOptions = {};
    const str = (key: string): string | undefined => {
        const v = get(key);
        return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
    };
    const int = (key: string): number | undefined => {
        const v = get(key);
        return typeof v === "number" && Number.isInteger(v) ? v : undefined;
    };
    const modelPath = str("modelPath");
    if (modelPath !== undefined) out.modelPath = expandPath(modelPath, exp.home, exp.workspaceFolder, exp.env);
    const device = str("device");
    if (device !== undefined) out.device = device;
    const maxTokens = int("maxTokens");
    if (maxTokens !== undefined) out.maxTokens = maxTokens;
    const steps = int("steps");
    if (steps !== undefined && steps > 0) out.steps = steps;
    const threshold = get("threshold");
    if (typeof threshold === "number" && Number.isFinite(threshold) && threshold > 0) out.threshold = threshold;
    const debounceMs = int("debounceMs");
    if (debounceMs !== undefined) out.debounceMs = debounceMs;
    const constrained = get("constrained");
    if (typeof constrained === "boolean") out.constrained = constrained;
    const retry = get("retry");
    if (typeof retry === "boolean") out.retry = retry;
    const feedbackFile = str("feedbackFile");
    if (feedbackFile !== undefined) out.feedbackFile = expandPath(feedbackFile, exp.home, exp.workspaceFolder, exp.env);
    const minScore = get("minScore");
    if (typeof minScore === "number" && Number.isFinite(minScore) && minScore <= 0) out.minScore = minScore;
    const cursorCandidates = int("cursorCandidates");
    if (cursorCandidates !== undefined && cursorCandidates >= 0) out.cursorCandidates = cursorCandidates;
    const drafts = int("drafts");
    if (drafts !== undefined && drafts >= 0) out.drafts = drafts;
    const relatedFiles = get("relatedFiles");
    if (typeof relatedFiles === "boolean") out.relatedFiles = relatedFiles;
    return out;
}

/** The didChangeConfiguration payload: the server reads it under "infill" and resets what is absent. */
export function configurationPayload(options: ServerOptions): { infill: ServerOptions } {
    return { infill: options };
}

/** Whether a configuration change needs a new server process rather than a notification. */
export function needsRestart(affects: (section: string) => boolean): boolean {
    return RESTART_KEYS.some((k) => affects(`infill.${k}`));
}

/** Whether a change touches an option the server reads. */
export function affectsServer(affects: (section: string) => boolean): boolean {
    return SERVER_KEYS.some((k) => affects(`infill.${k}`));
}
