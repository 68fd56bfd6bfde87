/**
 * Who may do what to which session. Every request of the edge API is authorized for the one session it
 * touches (its id parsed and normalized exactly as the router routes it) and the action it performs, by an
 * app-supplied {@link Authorize} function. Shipped: the root token (the simplest policy, the default), a
 * JWT verifier whose claims scope sessions and actions (HS256 secrets or RS256/ES256 through a JWKS, with
 * `jose`: a well-kept, dependency-free JOSE library that runs in workerd, browsers and Node), and
 * short-lived read-only stream tokens for `EventSource`, which cannot send an Authorization header.
 */
import { timingSafeEqual } from "hono/utils/buffer";
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  type JSONWebKeySet,
  type JWTPayload,
  jwtVerify,
  SignJWT,
} from "jose";
import { problemResponse } from "./problem.ts";

/** What a request does to its session. */
export const EDGE_ACTIONS = [
  "read",
  "submit",
  "signal",
  "drop-signal",
  "cancel",
  "replicate",
  "admin",
] as const;
export type EdgeAction = (typeof EDGE_ACTIONS)[number];
/** Actions a token holds only when its claim names them: they change what others gave, or the session's host. */
const NOT_BY_DEFAULT: ReadonlySet<EdgeAction> = new Set(["drop-signal", "replicate", "admin"]);

/** Who a request acts for, as an authorizer established it. */
export interface Principal {
  /** A stable id (a JWT's `sub`, `root`): rate limits are kept per principal. */
  readonly id: string;
  /** When the credential it was proven by runs out (a JWT's `exp`, ms): nothing minted from it outlives it. */
  readonly expiresAt?: number;
}

/** What an authorizer decides on. */
export interface AuthorizeInput<Env> {
  /** The session the request touches, as the router parsed and will route it. */
  readonly sessionId: string;
  readonly action: EdgeAction;
  /** The bearer token of the `Authorization` header, if any. */
  readonly token: string | undefined;
  readonly request: Request;
  readonly env: Env;
}

/** Returns the principal the request acts for, or the response to refuse it with (401, 403). */
export type Authorize<Env> = (
  input: AuthorizeInput<Env>,
) => Principal | Response | Promise<Principal | Response>;

/** RFC 9110 §11.1: the scheme is case-insensitive, and one or more spaces may follow it. */
const BEARER = /^Bearer +([\x21-\x7e]+)$/i;

/** The bearer token of a request's `Authorization` header, if it has a well-formed one. */
export function bearerToken(request: Request): string | undefined {
  return BEARER.exec(request.headers.get("authorization") ?? "")?.[1];
}

/** An `Authorization` header's bearer token: undefined without the header, a 401 for a malformed one. */
export function bearerOf(header: string | undefined): string | undefined | Response {
  if (header === undefined) return undefined;
  return BEARER.exec(header)?.[1] ?? unauthorized("malformed Authorization header");
}

/** 401: no usable credentials. */
export function unauthorized(detail = "missing or invalid credentials"): Response {
  return problemResponse(401, "unauthorized", detail, undefined, {
    "www-authenticate": 'Bearer realm="durable-agent"',
  });
}

/** 403: valid credentials that do not grant this action on this session. */
export function forbidden(sessionId: string, action: EdgeAction): Response {
  return problemResponse(403, "forbidden", `not allowed to ${action} session ${sessionId}`);
}

/**
 * The root token: one secret that grants every action on every session. The simplest policy, for a
 * single-tenant backend; give users scoped JWTs instead.
 */
export function rootToken<Env>(secret: (env: Env) => string | undefined): Authorize<Env> {
  return async ({ token, env }) => {
    const expected = secret(env);
    if (!expected) return problemResponse(503, "unconfigured", "the server has no API token configured");
    if (token === undefined || !(await timingSafeEqual(expected, token))) return unauthorized();
    return { id: "root" };
  };
}

export interface JwtAuthorizerOptions<Env> {
  /** An HS256 shared secret. */
  readonly secret?: (env: Env) => string | undefined;
  /** A JWKS URL (RS256, ES256, …): fetched and cached by `jose`, refreshed on an unknown key id. */
  readonly jwksUrl?: (env: Env) => string | undefined;
  /** A JWKS given inline. */
  readonly jwks?: JSONWebKeySet;
  readonly issuer?: string;
  readonly audience?: string;
  /** Accepted algorithms (default HS256 with `secret`, RS256 and ES256 with a JWKS). */
  readonly algorithms?: readonly string[];
  /**
   * The claim listing the sessions a principal may act on (default `sessions`): exact ids, or prefixes
   * ending in `*` (`"team-7:*"`).
   */
  readonly sessionsClaim?: string;
  /** The claim listing its actions (default `actions`; absent: every action but `drop-signal`, `replicate`, `admin`). */
  readonly actionsClaim?: string;
}

/**
 * Verifies a JWT bearer token and scopes it by its claims.
 *
 * @example
 * createEdgeApp<Env>({ authorize: jwtAuthorizer({ secret: (env) => env.JWT_SECRET, issuer: "my-app" }) });
 * // token claims: { sub: "user-42", sessions: ["user-42:*"], actions: ["read", "submit", "signal"] }
 */
export function jwtAuthorizer<Env>(options: JwtAuthorizerOptions<Env>): Authorize<Env> {
  const local = options.jwks ? createLocalJWKSet(options.jwks) : undefined;
  const remote = new Map<string, ReturnType<typeof createRemoteJWKSet>>();
  const sessionsClaim = options.sessionsClaim ?? "sessions";
  const actionsClaim = options.actionsClaim ?? "actions";
  return async ({ token, env, sessionId, action }) => {
    if (token === undefined) return unauthorized();
    let payload: JWTPayload;
    try {
      payload = await verifyJwt(token, env);
    } catch {
      // The reason (expired, bad signature, wrong issuer) is not echoed: it helps an attacker more than a user.
      return unauthorized("invalid or expired token");
    }
    if (typeof payload.sub !== "string" || payload.sub === "")
      return unauthorized("the token names no subject");
    const sessions = stringList(payload[sessionsClaim]);
    // `replicate` lets a browser tab lead the session and write any of its records (the edge acts on them
    // when it takes over): full trust in the session, so granted only when named.
    // Only an absent claim gets the defaults: a malformed one ("read" for ["read"]) grants nothing, never more
    // than its issuer meant.
    const claim = payload[actionsClaim];
    const actions =
      claim === undefined ? EDGE_ACTIONS.filter((a) => !NOT_BY_DEFAULT.has(a)) : (stringList(claim) ?? []);
    if (!sessions?.some((pattern) => matchesSession(pattern, sessionId)) || !actions.includes(action))
      return forbidden(sessionId, action);
    return {
      id: `jwt:${payload.sub}`,
      ...(typeof payload.exp === "number" && { expiresAt: payload.exp * 1000 }),
    };
  };

  async function verifyJwt(token: string, env: Env): Promise<JWTPayload> {
    const checks = {
      ...(options.issuer !== undefined && { issuer: options.issuer }),
      ...(options.audience !== undefined && { audience: options.audience }),
    };
    const secret = options.secret?.(env);
    if (secret) {
      const key = new TextEncoder().encode(secret);
      return (await jwtVerify(token, key, { ...checks, algorithms: [...(options.algorithms ?? ["HS256"])] }))
        .payload;
    }
    const url = options.jwksUrl?.(env);
    const verify = { ...checks, algorithms: [...(options.algorithms ?? ["RS256", "ES256"])] };
    if (url) {
      const keys = remote.get(url) ?? createRemoteJWKSet(new URL(url));
      remote.set(url, keys);
      return (await jwtVerify(token, keys, verify)).payload;
    }
    if (!local) throw new Error("no key configured");
    return (await jwtVerify(token, local, verify)).payload;
  }
}

/** The first authorizer that grants the request wins; otherwise the most specific refusal (403 over 401). */
export function anyOf<Env>(...authorizers: Authorize<Env>[]): Authorize<Env> {
  return async (input) => {
    let refusal: Response | undefined;
    for (const authorize of authorizers) {
      const result = await authorize(input);
      if (!(result instanceof Response)) return result;
      if (!refusal || result.status === 403 || (refusal.status !== 403 && result.status === 503))
        refusal = result;
    }
    return refusal ?? unauthorized();
  };
}

/** Whether a `sessions` claim entry covers `sessionId`: the same id, or a prefix ending in `*`. */
export function matchesSession(pattern: string, sessionId: string): boolean {
  return pattern.endsWith("*") ? sessionId.startsWith(pattern.slice(0, -1)) : pattern === sessionId;
}

function stringList(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.every((v) => typeof v === "string") ? value : undefined;
}

const STREAM_AUDIENCE = "durable-agent:stream";

/**
 * A read-only token for one session's event stream, valid for `ttlMs` (and never past the credential of
 * the principal it is minted for: `Principal.expiresAt`): what a browser's `EventSource`
 * passes as `?access_token=` (it cannot send headers). Minted by `POST /sessions/:id/stream-token` for a
 * principal that may read the session; never the root token in a URL.
 */
export async function mintStreamToken(
  secret: string,
  principal: Principal,
  sessionId: string,
  ttlMs: number,
  now: number,
): Promise<{ token: string; expiresAt: number }> {
  const expiresAt = Math.min(now + ttlMs, principal.expiresAt ?? Number.POSITIVE_INFINITY);
  const token = await new SignJWT({ sid: sessionId })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(principal.id)
    .setAudience(STREAM_AUDIENCE)
    .setIssuedAt(Math.floor(now / 1000))
    .setExpirationTime(Math.floor(expiresAt / 1000))
    .sign(streamKey(secret));
  return { token, expiresAt };
}

/** The principal a stream token was minted for, if it is valid for reading `sessionId` now. */
export async function verifyStreamToken(
  secret: string,
  token: string,
  sessionId: string,
): Promise<Principal | undefined> {
  try {
    const { payload } = await jwtVerify(token, streamKey(secret), {
      audience: STREAM_AUDIENCE,
      algorithms: ["HS256"],
    });
    if (payload.sid !== sessionId || typeof payload.sub !== "string") return undefined;
    return { id: payload.sub };
  } catch {
    return undefined;
  }
}

/** Stream tokens are signed with a key of their own, derived from the secret, never the secret itself. */
function streamKey(secret: string): Uint8Array {
  return new TextEncoder().encode(`durable-agent stream token key\u0000${secret}`);
}
