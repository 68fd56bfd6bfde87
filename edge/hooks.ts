/**
 * Callback URLs for third-party systems (a payment provider, a CI job): one unguessable URL per session and
 * signal key, `POST /hooks/:session/:key/:mac`, whose body is the signal's payload. The mac is an HMAC-SHA256
 * of the session id and the key under a secret, so the URL resolves that one wait and nothing else — no
 * API token travels to the third party, and a URL for one key or session is refused for any other.
 */

/** Callback macs are made with a key of their own, derived from the secret, never the secret itself. */
async function hookKey(secret: string): Promise<CryptoKey> {
  const material = new TextEncoder().encode(`durable-agent signal callback key\u0000${secret}`);
  return crypto.subtle.importKey("raw", material, { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
    "verify",
  ]);
}

function message(sessionId: string, key: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(`${sessionId}\u0000${key}`);
}

function base64url(bytes: ArrayBuffer): string {
  let text = "";
  for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64url(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (!/^[A-Za-z0-9_-]{43}$/.test(text)) return undefined; // 32 bytes, unpadded
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

/** The mac of the callback URL for `key` of `sessionId`. */
export async function signalCallbackMac(secret: string, sessionId: string, key: string): Promise<string> {
  return base64url(await crypto.subtle.sign("HMAC", await hookKey(secret), message(sessionId, key)));
}

/** The path of the callback URL for `key` of `sessionId` (append it to the Worker's origin). */
export async function signalCallbackPath(secret: string, sessionId: string, key: string): Promise<string> {
  const mac = await signalCallbackMac(secret, sessionId, key);
  return `/hooks/${encodeURIComponent(sessionId)}/${encodeURIComponent(key)}/${mac}`;
}

/** Whether `mac` is the callback mac of `key` of `sessionId` (compared in constant time by Web Crypto). */
export async function verifySignalCallback(
  secret: string,
  sessionId: string,
  key: string,
  mac: string,
): Promise<boolean> {
  const bytes = fromBase64url(mac);
  if (!bytes) return false;
  return crypto.subtle.verify("HMAC", await hookKey(secret), bytes, message(sessionId, key));
}

/** A requestId for a callback without an `Idempotency-Key`: its payload's digest (a redelivery repeats it). */
export async function callbackRequestId(body: string): Promise<string> {
  return `hook-${(await textDigest(body)).slice(0, 32)}`;
}

/** The SHA-256 digest of `text`'s UTF-8, base64url (43 characters). */
export async function textDigest(text: string): Promise<string> {
  return base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
}
