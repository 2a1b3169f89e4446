// When to restart a server that died: exponential backoff, a reset after a healthy run, and a
// limit after which we stop and wait for the user (Restart Server). Pure: the clock is passed in.

export interface BackoffOptions {
    /** delay before the first restart */
    initialMs: number;
    /** multiplier per consecutive failure */
    factor: number;
    /** longest delay */
    maxMs: number;
    /** consecutive failures after which we give up (restart only on request) */
    maxAttempts: number;
    /** a server that ran this long counts as healthy: the next failure starts again at initialMs */
    healthyAfterMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = {
    initialMs: 1000,
    factor: 2,
    maxMs: 30_000,
    maxAttempts: 5,
    healthyAfterMs: 60_000,
};

export class Backoff {
    private failures = 0;
    private startedAt: number | undefined;

    constructor(readonly options: BackoffOptions = DEFAULT_BACKOFF) {}

    /** consecutive failures so far */
    get attempts(): number {
        return this.failures;
    }

    /** The server (re)started at `now`. */
    started(now: number): void {
        this.startedAt = now;
    }

    /**
     * The server failed at `now`: the delay before the next restart, or undefined to give up.
     * A server that had run for healthyAfterMs resets the count first.
     */
    failed(now: number): number | undefined {
        if (this.startedAt !== undefined && now - this.startedAt >= this.options.healthyAfterMs) {
            this.failures = 0;
        }
        this.startedAt = undefined;
        this.failures += 1;
        if (this.failures > this.options.maxAttempts) {
            return undefined;
        }
        const o = this.options;
        return Math.min(o.maxMs, Math.round(o.initialMs * Math.pow(o.factor, this.failures - 1)));
    }

    /** A restart the user asked for: start counting again. */
    reset(): void {
        this.failures = 0;
        this.startedAt = undefined;
    }
}
