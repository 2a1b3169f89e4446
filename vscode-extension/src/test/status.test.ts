import * as assert from "node:assert/strict";
import { test } from "node:test";
import { formatLatency, fromServerMessage, fromStatusNotification, render } from "../status";

test("the server's load messages set the model and device", () => {
    assert.deepEqual(fromServerMessage("infill: loaded tiny-test on cpu"), { phase: "ready", model: "tiny-test", device: "cpu", precision: undefined, message: undefined });
    assert.deepEqual(fromServerMessage("infill: loaded infill-diffusion-5.3M on cpu (bfloat16)"),
        { phase: "ready", model: "infill-diffusion-5.3M", device: "cpu", precision: "bfloat16", message: undefined });
    assert.match(render({ phase: "ready", model: "m", device: "cpu", precision: "bfloat16" }, true).tooltip, /precision: bfloat16/);
    assert.deepEqual(fromServerMessage("infill: could not load the model: no such directory"), { phase: "error", message: "could not load the model: no such directory" });
    assert.equal(fromServerMessage("infill: fill failed"), undefined);
});

test("infill/status notification", () => {
    assert.deepEqual(fromStatusNotification({ state: "ready", model: "m", device: "cuda:0", latencyMs: 12.5 }), { phase: "ready", model: "m", device: "cuda:0", serverMs: 12.5 });
    assert.equal(fromStatusNotification({ what: 1 }), undefined);
    assert.equal(fromStatusNotification(null), undefined);
});

test("rendering: ready, off, error", () => {
    const ready = render({ phase: "ready", model: "tiny", device: "cpu", latencyMs: 83.2 }, true);
    assert.equal(ready.text, "$(sparkle) tiny · cpu · 83 ms");
    assert.equal(ready.error, false);
    assert.equal(ready.command, "infill.statusMenu");
    assert.match(render({ phase: "ready", model: "tiny" }, false).text, /^\$\(circle-slash\) tiny$/);
    const err = render({ phase: "error", message: "server not found" }, true);
    assert.equal(err.error, true);
    assert.equal(err.command, "infill.showLogs");
    assert.match(err.tooltip, /server not found/);
    assert.equal(formatLatency(1534), "1.5 s");
});
