/**
 * A tab's copy of its edge's run: while the edge owns a linked session, this browser's copy takes its
 * commits as they come (read-only, `followRemote`) and every tab is shown them. A copy the edge wrote past
 * (this browser was closed mid-run) is rebuilt: what people gave in its unsent commits goes to the durable
 * inbox first — given again once a tab here leads — and every tab reopens the copy.
 */
import { followRemote, type RemoteFollower, type Storage, type WithheldSignal } from "../src/index.ts";
import type { BrowserSessionHostOptions } from "./host-options.ts";
import { type InboxRow, inboxRowOf } from "./inbox.ts";

/** What following needs from its tab. */
export interface FollowingTab {
  /** A new handle on the session's store. */
  storage(): Storage;
  /** Tells the other tabs the copy moved (`replaced`: it was rebuilt and must be reopened). */
  post(message: { type: "replaced" } | { type: "committed"; version: number }): void;
  /** Shows the copy in this tab (`reopen`: the copy was rebuilt). */
  show(reopen: boolean): Promise<void>;
  /** Queues an input in the durable inbox. */
  queue(row: InboxRow): Promise<void>;
  /** Whether the tab follows now (it neither leads nor was closed). */
  follows(): boolean;
}

export class EdgeFollowing {
  private following: { follower: RemoteFollower; storage: Storage } | undefined;
  /** Bumped by every start and stop: a start overtaken while it was starting never follows. */
  private generation = 0;
  /**
   * The copy was rebuilt from the edge's history (sessions open on the old one reopen it), with the signals
   * it held that the edge does not and are not given again.
   */
  private replaced: readonly WithheldSignal[] | undefined;

  constructor(
    private readonly options: BrowserSessionHostOptions,
    private readonly tab: FollowingTab,
  ) {}

  /** Starts following (a linked session only, once, while the tab follows; `announce`: says so). */
  async start(announce = true): Promise<void> {
    const link = this.options.link;
    if (!link || this.following || !this.tab.follows()) return;
    const generation = ++this.generation;
    const storage = this.tab.storage();
    try {
      const follower = await followRemote({
        storage,
        remote: link.remote,
        id: this.options.sessionId,
        ...(this.options.clock !== undefined && { clock: this.options.clock }),
        ...(this.options.timers !== undefined && { timers: this.options.timers }),
        everyMs: link.followEveryMs ?? 1_000,
        onPulled: (version) => {
          // A rebuilt copy is reopened (sessions on the old one hold discarded commits), here and in the
          // other tabs; otherwise they catch up.
          const rebuilt = this.replaced;
          this.replaced = undefined;
          this.tab.post(rebuilt ? { type: "replaced" } : { type: "committed", version });
          void this.tab.show(rebuilt !== undefined);
          if (rebuilt?.length) link.onWithheld?.(rebuilt);
        },
        onError: (error) => link.onStatus?.("refused", error),
        onRebased: async (inputs, withheld) => {
          for (const input of inputs) await this.tab.queue(inboxRowOf(input));
          this.replaced = withheld;
        },
      });
      // Taken back (or closed) while it was starting: it never follows.
      if (generation !== this.generation || !this.tab.follows()) {
        await follower.stop();
        await storage.close();
        return;
      }
      this.following = { follower, storage };
      if (announce) link.onStatus?.("following");
      await follower.pull();
    } catch (error) {
      link.onStatus?.("refused", error as Error);
    }
  }

  /** Stops copying the edge's commits, once a pull under way has ended; its store handle is closed. */
  async stop(): Promise<void> {
    this.generation++;
    const following = this.following;
    this.following = undefined;
    if (!following) return;
    await following.follower.stop();
    await following.storage.close().catch(() => undefined);
  }
}
