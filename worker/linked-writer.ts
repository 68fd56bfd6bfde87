/**
 * A tab's writer for a session linked to its edge host: claimed from the edge first (catching up on what the
 * edge wrote meanwhile, or rebuilding a copy that diverged), and given up to the edge when it fences this tab.
 */
import {
  type LinkedSession,
  linkSession,
  type OpenSessionOptions,
  type WithheldSignal,
} from "../src/index.ts";
import type { BrowserSessionHostOptions } from "./host-options.ts";
import { type InboxRow, inboxRowOf } from "./inbox.ts";

/** What linking needs of the tab. */
export interface LinkingTab {
  /** Queues an input for the leader (a diverged copy's inputs, before it is discarded). */
  queue(row: InboxRow): Promise<void>;
  /** The claim succeeded: `linked` is the tab's writer from now on (set before anything else runs). */
  adopt(linked: LinkedSession): void;
  /** The edge took an adopted session over (this tab was quiet past its lease): the tab follows. */
  fenced(linked: LinkedSession): void;
  /** The claim was refused after the copy was rebuilt from the edge: the tab shows the rebuilt copy. */
  showRebuilt(): Promise<void>;
  /** The copy was rebuilt: sessions over the old copy (other tabs', pages') hold discarded commits. */
  replaced(): void;
}

type Link = NonNullable<BrowserSessionHostOptions["link"]>;

/** Claims the session from the edge and returns its writer; undefined when the claim was refused or fenced. */
export async function openLinkedWriter(
  options: OpenSessionOptions,
  link: Link,
  tab: LinkingTab,
): Promise<LinkedSession | undefined> {
  let rebased = false;
  let withheld: readonly WithheldSignal[] = [];
  try {
    let linked: LinkedSession | undefined;
    let fenced = false;
    linked = await linkSession({
      ...options,
      remote: link.remote,
      ...(link.holder !== undefined && { holder: link.holder }),
      // A diverged copy's inputs go to the durable inbox before it is discarded (given again once a tab
      // leads, also when this one then cannot: its code cannot continue the edge's run).
      onRebased: async (inputs, notGiven) => {
        for (const input of inputs) await tab.queue(inboxRowOf(input));
        rebased = true;
        withheld = notGiven;
      },
      onStatus: (status) => {
        link.onStatus?.(status);
        // The edge took the session over (this tab was quiet past its lease): follow, do not fight it.
        if (status !== "fenced" && status !== "closed") return;
        fenced = true;
        if (linked) tab.fenced(linked);
      },
    });
    if (fenced) return undefined; // fenced while it was still linking: keep following
    tab.adopt(linked);
    return linked;
  } catch (error) {
    link.onStatus?.("refused", error as Error);
    if (rebased) await tab.showRebuilt();
    return undefined;
  } finally {
    if (rebased) tab.replaced();
    if (withheld.length > 0) link.onWithheld?.(withheld);
  }
}
