// Pure rules the extension applies around the server's suggestions (unit-tested without VS Code):
// which languages the model knows, where "Open Settings" goes, ghost text that would glue onto a
// word just accepted, and documents typed in while the server was starting.

/** The languages the server's model was trained on, from its initialize result
 * (capabilities.experimental.infill.languageIds) or its infill/languages notification; undefined
 * when the server does not say (then every language the extension activates for is served). */
export function serverLanguageIds(payload: unknown): string[] | undefined {
    const p = payload as { capabilities?: { experimental?: { infill?: unknown } } } | undefined;
    const infill = (p?.capabilities?.experimental?.infill ?? payload) as { languageIds?: unknown } | undefined;
    const ids = infill?.languageIds;
    return Array.isArray(ids) && ids.every((x) => typeof x === "string") && ids.length ? (ids as string[]) : undefined;
}

/** Which documents get suggestions, and one notice per language per session for the others. */
export class LanguageGate {
    private ids: string[] | undefined;
    private readonly told = new Set<string>();

    set(ids: string[] | undefined): void {
        this.ids = ids;
    }

    get known(): string[] | undefined {
        return this.ids;
    }

    allows(languageId: string): boolean {
        return !this.ids || this.ids.includes(languageId);
    }

    /** The notice for a refused language, the first time only (else undefined). */
    notice(languageId: string, model: string | undefined): string | undefined {
        if (this.allows(languageId) || this.told.has(languageId)) return undefined;
        this.told.add(languageId);
        return `infill: no suggestions in ${languageId} files: ${model ?? "the model"} was trained on ${this.ids!.join(", ")} only.`;
    }
}

/** The Settings editor's search for an error: the setting it is about, else all of infill's. */
export function settingsQuery(message: string): string {
    const m = /infill\.[A-Za-z.]+/.exec(message);
    if (m) return m[0].replace(/\.$/, "");
    if (/not found|could not start|exited while starting/.test(message)) return "infill.serverPath";
    return "@ext:infill.infill";
}

const WORD = /[\p{L}\p{N}_]/u;

/**
 * Whether ghost text `insertText` would glue onto the word that ends at the cursor when that word
 * was just accepted from a suggestion (`edit_price` accepted, then `n`): right after an accept the
 * word is finished, but the model, which sees a word running into the cursor, continues it.
 */
export function gluesOntoAcceptedWord(charBefore: string, insertText: string, justAccepted: boolean): boolean {
    return justAccepted && WORD.test(charBefore) && WORD.test(insertText.charAt(0));
}

/**
 * The documents edited while the server was not running. VS Code asks an inline completion
 * provider for ghost text on an edit only, and the provider exists only once the language client
 * runs: a file opened and typed in at once (while `infill lsp` starts, seconds) got no ghost text,
 * not even after the model loaded, until its next key. Once the server runs, the active editor is
 * asked again if its document is one of these.
 */
export class EditsWhileStarting {
    private readonly uris = new Set<string>();

    note(uri: string, serverRunning: boolean): void {
        if (!serverRunning) this.uris.add(uri);
    }

    /** Whether `uri` (the active editor's document) was edited while the server was not running;
     * forgets every document noted (the server runs now). */
    take(uri: string | undefined): boolean {
        const hit = uri !== undefined && this.uris.has(uri);
        this.uris.clear();
        return hit;
    }
}
