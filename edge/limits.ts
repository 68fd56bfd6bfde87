/**
 * Bounds on what one caller and one session may hold: a per-principal request rate in the router, and
 * per-session caps (open streams, waiting requests, unfinished Submissions) in the session's object. Over a
 * bound, the answer is 429 with `Retry-After`, as problem+json.
 */
import type { Principal } from "./auth.ts";
import { problemResponse } from "./problem.ts";

/** A rate limiter's verdict for one request. */
export type RateDecision = { readonly ok: true } | { readonly ok: false; readonly retryAfterMs: number };

/**
 * Decides whether `principal` may make one more request. Plug a platform limiter in here (Cloudflare's rate
 * limiting binding, a Durable Object per principal) to count across isolates.
 */
export type RateLimit<Env> = (principal: Principal, env: Env) => RateDecision | Promise<RateDecision>;

export interface MemoryRateLimitOptions {
  /** Requests allowed per window (the bucket's size). */
  readonly requests: number;
  /** The window over which `requests` refill. */
  readonly perMs: number;
  /** Principals tracked at once; the least recently seen are forgotten first (default 10 000). */
  readonly maxPrincipals?: number;
  /** The clock (tests pass their own). */
  readonly now?: () => number;
}

/**
 * A token bucket per principal, in this isolate's memory: it bounds a client hammering one isolate, not a
 * client spread over many (Cloudflare runs many isolates); use a platform limiter for a global bound.
 */
export function memoryRateLimit(options: MemoryRateLimitOptions): RateLimit<unknown> {
  const buckets = new Map<string, { tokens: number; at: number }>();
  const max = options.maxPrincipals ?? 10_000;
  const now = options.now ?? (() => Date.now());
  const refillPerMs = options.requests / options.perMs;
  return (principal) => {
    const t = now();
    const bucket = buckets.get(principal.id) ?? { tokens: options.requests, at: t };
    buckets.delete(principal.id); // re-inserted below: the map's order is least recently seen first
    bucket.tokens = Math.min(options.requests, bucket.tokens + (t - bucket.at) * refillPerMs);
    bucket.at = t;
    buckets.set(principal.id, bucket);
    if (buckets.size > max) buckets.delete(buckets.keys().next().value as string);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterMs: Math.ceil((1 - bucket.tokens) / refillPerMs) };
  };
}

/** Caps on one session, enforced by its object. */
export interface SessionLimits {
  /** Open event streams (default 16). */
  readonly streams?: number;
  /** Requests waiting at once (`?wait=`, default 32). */
  readonly waiters?: number;
  /** Unfinished Submissions before new ones are refused (default 64; a retried requestId is always answered). */
  readonly queuedSubmissions?: number;
}

export const DEFAULT_SESSION_LIMITS: Required<SessionLimits> = {
  streams: 16,
  waiters: 32,
  queuedSubmissions: 64,
};

/** How long a client refused for a full session should wait before it asks again. */
export const BUSY_RETRY_MS = 5_000;

/** 429 with `Retry-After` (whole seconds, at least 1). */
export function tooManyRequests(detail: string, retryAfterMs: number): Response {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return problemResponse(429, "rate-limited", detail, undefined, { "retry-after": String(seconds) });
}

/** Counts a resource held while a request runs; `acquire` fails when `limit` are held. */
export class Gauge {
  private held = 0;
  constructor(private readonly limit: number) {}
  acquire(): (() => void) | undefined {
    if (this.held >= this.limit) return undefined;
    this.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held--;
    };
  }
  get count(): number {
    return this.held;
  }
}
