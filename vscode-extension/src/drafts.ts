// Streaming drafts (the setting infill.drafts; the server's infill/draft notifications, lsp/README.md
// "Streaming drafts"): while the ghost text at the cursor is filled, its fill so far is shown as
// ghost text, and the final fill replaces it. Pure logic (unit-tested without VS Code); extension.ts
// wires it to the inline completion provider.
//
// VS Code shows what an inline completion provider returns, and asks again only on an edit, a
// cursor move or the command editor.action.inlineSuggest.trigger, which cancels the request it
// has under way. So a fill that streams drafts is not tied to one provider call: the first call at
// a place starts it (with its own cancellation), each call at that place answers at once with the
// latest draft (or waits for one, or for the fill), and a new draft or the final fill asks VS Code
// to call again (trigger) when no call is waiting. A call at another place, or dismiss(), cancels
// the fill: the server then sends none of its drafts.

/** A document version and a cursor position (the LSP uri, the document's version, the 0-based
 * line and UTF-16 character): where a fill is for. */
export interface Place {
    uri: string;
    version: number;
    line: number;
    character: number;
}

export function samePlace(a: Place, b: Place): boolean {
    return a.uri === b.uri && a.version === b.version && a.line === b.line && a.character === b.character;
}

/** An infill/draft notification's params, read; undefined for anything else. */
export interface Draft {
    place: Place;
    id: number;
    seq: number;
    text: string;
}

export function parseDraft(params: unknown): Draft | undefined {
    const p = params as { textDocument?: { uri?: unknown; version?: unknown }; position?: { line?: unknown; character?: unknown };
        id?: unknown; seq?: unknown; text?: unknown } | undefined;
    const uri = p?.textDocument?.uri, version = p?.textDocument?.version, line = p?.position?.line, character = p?.position?.character;
    if (typeof uri !== "string" || typeof version !== "number" || typeof line !== "number" || typeof character !== "number"
        || typeof p?.id !== "number" || typeof p.seq !== "number" || typeof p.text !== "string") return undefined;
    return { place: { uri, version, line, character }, id: p.id, seq: p.seq, text: p.text };
}

/** The answer to one provider call: the final fill (the server's result, and the ms since the
 * fill started), the latest draft, or nothing (the call was cancelled, or its fill was). */
export type Answer<T> = { kind: "final"; value: T; ms: number } | { kind: "draft"; text: string } | { kind: "none" };

/** A fill started for a place: its result, and how to cancel it. */
export interface Started<T> {
    result: PromiseLike<T>;
    cancel: () => void;
}

/** What a provider call's cancellation looks like (vscode.CancellationToken's shape). */
export interface Token {
    isCancellationRequested: boolean;
    onCancellationRequested(listener: () => void): { dispose(): void };
}

interface Fill<T> {
    place: Place;
    started: Started<T>;
    at: number;
    settled: boolean;
    value?: T;
    id: number; // the server's fill id, once a draft came (an older one's drafts are dropped)
    seq: number;
    draft?: string; // the latest draft
    shown: boolean; // a draft was given to VS Code
    waiter?: (answer: Answer<T>) => void; // the provider call waiting for a draft or the result
}

/**
 * The fill at the cursor and its drafts: at most one at a time.
 *
 * Invariants: a draft is answered only for the place of the current fill, never an older fill's
 * (a smaller id) nor an older draft (a smaller seq); once the fill settled, only its result is
 * answered; a cancelled fill answers nothing more; `trigger` is asked for only while something new
 * is there to show for the current place and no call waits for it.
 */
export class DraftedFills<T> {
    private fill: Fill<T> | undefined;

    /** `trigger(place)`: have VS Code ask again at `place` (if its active editor is still there);
     * `drafting(on)`: whether a draft is shown for a fill still under way (for Escape's binding). */
    constructor(private readonly hooks: { trigger: (place: Place) => void; drafting?: (on: boolean) => void },
                private readonly now: () => number = Date.now) {}

    /** Whether a draft is shown for a fill still under way. */
    get drafting(): boolean {
        return !!this.fill && !this.fill.settled && this.fill.shown;
    }

    /** VS Code asks for ghost text at `place`; `start()` starts the fill there (its first call). */
    provide(place: Place, token: Token, start: () => Started<T>): Promise<Answer<T>> {
        if (!this.fill || !samePlace(this.fill.place, place)) this.begin(place, start);
        const fill = this.fill!;
        if (fill.settled) return Promise.resolve(this.final(fill));
        if (fill.draft !== undefined) return Promise.resolve(this.showDraft(fill));
        fill.waiter?.({ kind: "none" }); // (VS Code cancelled that call when it made this one)
        return new Promise((resolve) => {
            const cancelled = token.onCancellationRequested(() => {
                if (fill.waiter === waiter) fill.waiter = undefined;
                resolve({ kind: "none" });
            });
            const waiter = (answer: Answer<T>) => {
                cancelled.dispose();
                resolve(answer);
            };
            if (token.isCancellationRequested) return waiter({ kind: "none" });
            fill.waiter = waiter;
        });
    }

    /** An infill/draft notification. */
    onDraft(params: unknown): void {
        const draft = parseDraft(params);
        const fill = this.fill;
        if (!draft || !fill || fill.settled || !samePlace(fill.place, draft.place)) return;
        if (draft.id < fill.id || (draft.id === fill.id && draft.seq <= fill.seq)) return;
        fill.id = draft.id;
        fill.seq = draft.seq;
        fill.draft = draft.text;
        const waiter = fill.waiter;
        fill.waiter = undefined;
        if (waiter) waiter(this.showDraft(fill));
        else this.hooks.trigger(fill.place);
    }

    /** The user dismissed the ghost text (Escape): cancel the fill; nothing of it is shown again. */
    dismiss(): void {
        this.cancel();
    }

    private begin(place: Place, start: () => Started<T>): void {
        this.cancel();
        const fill: Fill<T> = { place, started: start(), at: this.now(), settled: false, id: 0, seq: 0, shown: false };
        this.fill = fill;
        const settle = (value: T | undefined) => {
            if (this.fill !== fill || fill.settled) return; // cancelled or replaced: never shown
            fill.settled = true;
            fill.value = value;
            const waiter = fill.waiter;
            fill.waiter = undefined;
            if (waiter) waiter(this.final(fill));
            else if (fill.shown) this.hooks.trigger(fill.place); // the final fill replaces the draft shown
            this.hooks.drafting?.(false);
        };
        fill.started.result.then(settle, () => settle(undefined));
    }

    private showDraft(fill: Fill<T>): Answer<T> {
        if (!fill.shown) {
            fill.shown = true;
            this.hooks.drafting?.(true);
        }
        return { kind: "draft", text: fill.draft! };
    }

    /** The settled fill's answer; the fill is then forgotten (a later call starts another). */
    private final(fill: Fill<T>): Answer<T> {
        if (this.fill === fill) this.fill = undefined;
        return fill.value === undefined ? { kind: "none" } : { kind: "final", value: fill.value, ms: this.now() - fill.at };
    }

    private cancel(): void {
        const fill = this.fill;
        this.fill = undefined;
        if (!fill) return;
        const waiter = fill.waiter;
        fill.waiter = undefined;
        waiter?.({ kind: "none" });
        if (!fill.settled) {
            fill.started.cancel();
            if (fill.shown) this.hooks.drafting?.(false);
        }
    }
}
