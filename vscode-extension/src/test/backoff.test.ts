import * as assert from "node:assert/strict";
import { test } from "node:test";
import { Backoff, DEFAULT_BACKOFF } from "../backoff";

test("delays double up to the cap, then give up", () => {
    const b = new Backoff({ initialMs: 1000, factor: 2, maxMs: 5000, maxAttempts: 5, healthyAfterMs: 60_000 });
    const delays: (number | undefined)[] = [];
    let now = 0;
    for (let i = 0; i < 6; i++) {
        b.started(now);
        now += 100; // dies at once
        delays.push(b.failed(now));
    }
    assert.deepEqual(delays, [1000, 2000, 4000, 5000, 5000, undefined]);
    assert.equal(b.attempts, 6);
});

test("a healthy run resets the count", () => {
    const b = new Backoff(DEFAULT_BACKOFF);
    b.started(0);
    assert.equal(b.failed(10), 1000);
    b.started(1010);
    assert.equal(b.failed(1020), 2000);
    b.started(2000);
    assert.equal(b.failed(2000 + DEFAULT_BACKOFF.healthyAfterMs), 1000); // ran a minute: start over
});

test("reset (the user restarted) starts over; a failure without a start still counts", () => {
    const b = new Backoff(DEFAULT_BACKOFF);
    assert.equal(b.failed(0), 1000);
    assert.equal(b.failed(0), 2000);
    b.reset();
    assert.equal(b.attempts, 0);
    assert.equal(b.failed(0), 1000);
});

test("the default policy gives up after five quick crashes within a minute", () => {
    const b = new Backoff();
    let now = 0, total = 0, n = 0;
    for (;;) {
        b.started(now);
        const d = b.failed(now + 50);
        if (d === undefined) break;
        total += d; now += 50 + d; n++;
    }
    assert.equal(n, 5);
    assert.equal(total, 1000 + 2000 + 4000 + 8000 + 16000);
});
