/**
 * What the tabs of one session share: the session's Web Lock (its holder leads), and what they say to each
 * other over their BroadcastChannel — the leader announces commits (only once some follower said it
 * listens, so a lone tab pays nothing per commit), followers announce themselves and their inbox inputs.
 */
import type { InboxMessage } from "./inbox-relay.ts";
import { type Leadership, requestLeadership } from "./leadership.ts";

export type TabMessage =
  | { type: "committed"; version: number }
  | { type: "follower" }
  | { type: "leader" }
  /** The copy was rebuilt from the edge's history: followers reopen it. */
  | { type: "replaced" }
  | InboxMessage;

/** The name of a session's Web Lock and of its tabs' BroadcastChannel. */
export const tabScope = (database: string, sessionId: string) => `durable-agent:${database}:${sessionId}`;

/** Asks for the session's Web Lock (`steal`: taken from the tab that holds it). */
export function sessionLock(tab: { database: string; sessionId: string }, steal?: boolean): Leadership {
  return requestLeadership(tabScope(tab.database, tab.sessionId), { ...(steal !== undefined && { steal }) });
}
