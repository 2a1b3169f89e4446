import * as assert from "node:assert/strict";
import { test } from "node:test";
import { Answer, DraftedFills, Place, parseDraft } from "../drafts";

const HERE: Place = { uri: "file:///w/a.py", version: 3, line: 5, character: 7 };
const THERE: Place = { ...HERE, character: 8 };

/** What the server sends (lsp/README.md "Streaming drafts"). */
function note(place: Place, id: number, seq: number, text: string) {
    return { textDocument: { uri: place.uri, version: place.version }, position: { line: place.line, character: place.character },
        id, seq, text, step: seq, masked: 10 - seq };
}

/** A provider call's cancellation token that the test cancels. */
function token() {
    const listeners: (() => void)[] = [];
    return {
        isCancellationRequested: false,
        onCancellationRequested(l: () => void) {
            listeners.push(l);
            return { dispose: () => listeners.splice(listeners.indexOf(l), 1) };
        },
        cancel() {
            this.isCancellationRequested = true;
            [...listeners].forEach((l) => l());
        },
    };
}

/** A fill the test answers: its result's resolve, and whether it was cancelled. */
function fill() {
    let resolve!: (v: string) => void;
    const result = new Promise<string>((r) => (resolve = r));
    const f = { cancelled: false, resolve, started: () => ({ result, cancel: () => (f.cancelled = true) }) };
    return f;
}

function setup() {
    const triggers: Place[] = [];
    const drafting: boolean[] = [];
    let now = 1000;
    const fills = new DraftedFills<string>({ trigger: (p) => triggers.push(p), drafting: (on) => drafting.push(on) }, () => now);
    return { fills, triggers, drafting, advance: (ms: number) => (now += ms) };
}

const tick = () => new Promise((r) => setImmediate(r));

test("a draft notification is read; anything else is not", () => {
    assert.deepEqual(parseDraft(note(HERE, 2, 1, "ret")), { place: HERE, id: 2, seq: 1, text: "ret" });
    assert.equal(parseDraft({ ...note(HERE, 2, 1, "ret"), text: 3 }), undefined);
    assert.equal(parseDraft({ id: 1 }), undefined);
    assert.equal(parseDraft(undefined), undefined);
});

test("drafts answer the calls at their place until the final fill replaces them", async () => {
    const { fills, triggers, drafting, advance } = setup();
    const f = fill();
    let starts = 0;
    const start = () => (starts++, f.started());
    const first = fills.provide(HERE, token(), start); // waits: nothing to show yet
    fills.onDraft(note(HERE, 7, 1, "return"));
    assert.deepEqual(await first, { kind: "draft", text: "return" }); // the waiting call shows it, no trigger needed
    assert.deepEqual(triggers, []);
    assert.deepEqual(drafting, [true]);
    fills.onDraft(note(HERE, 7, 2, "return a +"));
    assert.deepEqual(triggers, [HERE]); // no call waits: VS Code is asked again...
    assert.deepEqual(await fills.provide(HERE, token(), start), { kind: "draft", text: "return a +" }); // ...and gets the latest
    advance(250);
    f.resolve("return a + b");
    await tick();
    assert.deepEqual(triggers, [HERE, HERE]); // the final fill replaces the draft shown
    assert.deepEqual(await fills.provide(HERE, token(), start), { kind: "final", value: "return a + b", ms: 250 });
    assert.deepEqual(drafting, [true, false]);
    assert.equal(starts, 1); // one fill for the place, however often VS Code asked
    assert.ok(!f.cancelled);
});

test("a waiting call gets the final fill when it comes before any draft", async () => {
    const { fills, triggers } = setup();
    const f = fill();
    const call = fills.provide(HERE, token(), f.started);
    f.resolve("x + 1");
    assert.deepEqual(await call, { kind: "final", value: "x + 1", ms: 0 });
    assert.deepEqual(triggers, []);
});

test("stale drafts are dropped: another place, an older fill or draft, after the result", async () => {
    const { fills, triggers } = setup();
    const f = fill();
    const call = fills.provide(HERE, token(), f.started);
    fills.onDraft(note(THERE, 9, 1, "elsewhere"));
    fills.onDraft(note({ ...HERE, version: 2 }, 9, 1, "an older version"));
    fills.onDraft(note(HERE, 9, 2, "two"));
    assert.deepEqual(await call, { kind: "draft", text: "two" });
    fills.onDraft(note(HERE, 9, 1, "one, late"));
    fills.onDraft(note(HERE, 8, 5, "an older fill's"));
    assert.deepEqual(await fills.provide(HERE, token(), f.started), { kind: "draft", text: "two" });
    assert.deepEqual(triggers, []);
    f.resolve("two + 2");
    await tick();
    fills.onDraft(note(HERE, 9, 3, "after the result"));
    assert.deepEqual(triggers, [HERE]); // the final fill's, not the late draft's
    assert.deepEqual(await fills.provide(HERE, token(), f.started), { kind: "final", value: "two + 2", ms: 0 });
});

test("a call at another place cancels the fill; nothing of it is shown after", async () => {
    const { fills, triggers, drafting } = setup();
    const old = fill();
    const waiting = fills.provide(HERE, token(), old.started);
    fills.onDraft(note(HERE, 1, 1, "old"));
    assert.deepEqual(await waiting, { kind: "draft", text: "old" });
    const fresh = fill();
    const call = fills.provide(THERE, token(), fresh.started);
    assert.ok(old.cancelled && !fresh.cancelled);
    assert.deepEqual(drafting, [true, false]);
    fills.onDraft(note(HERE, 1, 2, "old, late"));
    old.resolve("old's result");
    await tick();
    assert.deepEqual(triggers, []);
    fills.onDraft(note(THERE, 2, 1, "new"));
    assert.deepEqual(await call, { kind: "draft", text: "new" });
});

test("Escape (dismiss) cancels the fill: no more drafts, no final fill", async () => {
    const { fills, triggers, drafting } = setup();
    const f = fill();
    const call = fills.provide(HERE, token(), f.started);
    fills.onDraft(note(HERE, 1, 1, "draft"));
    await call;
    assert.ok(fills.drafting);
    fills.dismiss();
    assert.ok(f.cancelled && !fills.drafting);
    assert.deepEqual(drafting, [true, false]);
    fills.onDraft(note(HERE, 1, 2, "more"));
    f.resolve("final");
    await tick();
    assert.deepEqual(triggers, []);
});

test("a cancelled call answers nothing; its fill goes on for the next call at that place", async () => {
    const { fills, triggers } = setup();
    const f = fill();
    const t = token();
    const call = fills.provide(HERE, t, f.started);
    t.cancel();
    assert.deepEqual(await call, { kind: "none" } as Answer<string>);
    assert.ok(!f.cancelled);
    f.resolve("late");
    await tick();
    assert.deepEqual(triggers, []); // no draft was shown: nothing to replace
    assert.deepEqual(await fills.provide(HERE, token(), f.started), { kind: "final", value: "late", ms: 0 });
});
