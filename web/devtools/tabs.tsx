/** The devtools' views as tabs (the WAI-ARIA tabs pattern), and the tab a deep link pins. */
export const TABS = [
  "submissions",
  "pending",
  "conversation",
  "tasks",
  "documents",
  "timeline",
  "wake",
] as const;
export type Tab = (typeof TABS)[number];
const TAB_LABELS: Record<Tab, string> = {
  submissions: "Submissions",
  conversation: "Conversation",
  tasks: "Task graph",
  pending: "Waiting on outside",
  documents: "Documents",
  timeline: "Commit timeline",
  wake: "Wake & recovery",
};

/** What the URL pins besides the session (a deep link): the tab, a version (not live), a selected task. */
export function pinsFromUrl(): { tab: Tab; version: number | undefined; task: string | undefined } {
  const params = new URLSearchParams(location.search);
  const tab = params.get("tab");
  const version = Number(params.get("v") ?? Number.NaN);
  return {
    tab: (TABS as readonly string[]).includes(tab ?? "") ? (tab as Tab) : "tasks",
    version: Number.isSafeInteger(version) && version >= 0 ? version : undefined,
    task: params.get("task") ?? undefined,
  };
}

/** The list of views: a click, or the arrow keys, Home and End, choose one. */
export function TabList(props: { tab: Tab; onTab: (tab: Tab) => void }) {
  return (
    <div role="tablist" aria-label="views" class="tabs">
      {TABS.map((t) => (
        <button
          key={t}
          type="button"
          role="tab"
          aria-selected={props.tab === t}
          tabIndex={props.tab === t ? 0 : -1}
          data-testid={`tab-${t}`}
          onClick={() => props.onTab(t)}
          onKeyDown={(event) => {
            // The WAI-ARIA tabs pattern: arrows move between views, Home and End jump to the first and
            // last; Tab leaves the list.
            const at = TABS.indexOf(t);
            const index =
              event.key === "ArrowRight"
                ? (at + 1) % TABS.length
                : event.key === "ArrowLeft"
                  ? (at - 1 + TABS.length) % TABS.length
                  : event.key === "Home"
                    ? 0
                    : event.key === "End"
                      ? TABS.length - 1
                      : undefined;
            if (index === undefined) return;
            event.preventDefault();
            const next = TABS[index] as Tab;
            props.onTab(next);
            event.currentTarget.parentElement
              ?.querySelector<HTMLButtonElement>(`[data-testid=tab-${next}]`)
              ?.focus();
          }}
        >
          {TAB_LABELS[t]}
        </button>
      ))}
    </div>
  );
}
