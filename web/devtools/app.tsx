/**
 * The devtools page: attach to a session (local IndexedDB or edge HTTP), watch it live, scrub through its
 * versions. Everything is read-only except an explicit cancel (edge sessions).
 */
import { render } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { emptyView, type RecoveryPlan, type Registry } from "../../src/index.ts";
import { AttachForm, ImportFile, SessionList, type Target } from "./attach.tsx";
import { SessionHistory } from "./history.ts";
import { type RecoveryMark, recoveryLane } from "./outcome.ts";
import { PendingView } from "./pending.tsx";
import { ScrubberBar } from "./scrubber.tsx";
import { edgeSource, fileSource, localSource, type SessionSource, type WriterState } from "./sources.ts";
import { pinsFromUrl, type Tab, TabList } from "./tabs.tsx";
import { TaskGraph } from "./task-graph.tsx";
import { TimelineView } from "./timeline.tsx";
import { ConversationView, DocumentsView, SubmissionsView } from "./views.tsx";
import { WakeView } from "./wake.tsx";
import type { ModelPrice } from "./waterfall.tsx";
import { openWork } from "./writer.ts";

export interface DevtoolsOptions {
  /** The app's registry for a local session (recovery preview); omit when there is none. */
  readonly registryFor?: (database: string, sessionId: string) => Registry | undefined;
  /** Dollars per million tokens by model id: the waterfall adds a run's estimated cost to its token totals. */
  readonly prices?: Readonly<Record<string, ModelPrice>>;
  /**
   * Where `prices` come from, as the page says beside the cost (`"illustrative prices, set in main.tsx"`);
   * without it the page says "the prices this page was given".
   */
  readonly pricesFrom?: string;
}

function targetFromUrl(): Target | undefined {
  const params = new URLSearchParams(location.search);
  const session = params.get("session");
  if (!session) return undefined;
  const edge = params.get("edge");
  // A token never comes from the URL (it would land in history, logs and referrers): it is typed in.
  if (edge) return { kind: "edge", url: edge, token: "", session };
  return { kind: "local", database: params.get("local") ?? "durable-agent-demo", session };
}

function Devtools({ options }: { options: DevtoolsOptions }) {
  // An edge target from the URL only fills the form: its token is typed in, never read from the URL.
  const [linked] = useState<Target | undefined>(targetFromUrl);
  const [target, setTarget] = useState<Target | undefined>(linked?.kind === "edge" ? undefined : linked);
  const [source, setSource] = useState<SessionSource | undefined>(undefined);
  const [history, setHistory] = useState<SessionHistory | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  // Bumped when the history grows (a change appended, the earlier history put in front): memos follow it.
  const [tick, setTick] = useState(0);
  const [pins] = useState(pinsFromUrl);
  // The link's pinned version applies to the first session attached, not to every later one.
  const pinnedVersion = useRef(pins.version);
  const [live, setLive] = useState(pins.version === undefined);
  const [connection, setConnection] = useState<"live" | "reconnecting">("live");
  const [loadingEarlier, setLoadingEarlier] = useState(false);
  // Whether a writer drives the session (local: a tab holds its leader lock), asked every 2 s.
  const [writer, setWriter] = useState<{ state: WriterState; since: number } | undefined>(undefined);
  const [parked, setParked] = useState(0);
  const [version, setVersion] = useState(0);
  const [tab, setTab] = useState<Tab>(pins.tab);
  const [selectedTask, setSelectedTask] = useState<string | undefined>(pins.task);
  const liveRef = useRef(live);
  liveRef.current = live;
  // How the last write asked for (an answer, a cancel, a drop) went: a refusal shows until the next attempt,
  // which clears it, and a success replaces it (a refusal left beside an accepted answer would be untrue).
  // While one is under way it says so: a local session's write is done only once its leading tab took it.
  const [write, setWrite] = useState<{ ok: boolean | undefined; text: string } | undefined>(undefined);
  const attemptWrite = async (done: string, run: () => Promise<unknown> | undefined): Promise<void> => {
    setWrite({ ok: undefined, text: "asked: not written until the session's writer has taken it…" });
    try {
      await run();
      setWrite({ ok: true, text: done });
    } catch (e) {
      setWrite({ ok: false, text: (e as Error).message });
    }
  };

  useEffect(() => {
    if (!target) return;
    let closed = false;
    let stop: () => void = () => undefined;
    let opened: SessionSource | undefined;
    setError(undefined);
    setWrite(undefined);
    setLoadingEarlier(false);
    const pinned = pinnedVersion.current;
    pinnedVersion.current = undefined;
    const open = async () => {
      opened =
        target.kind === "local"
          ? await localSource(
              target.database,
              target.session,
              options.registryFor?.(target.database, target.session),
            )
          : target.kind === "edge"
            ? await edgeSource(target.url, target.token, target.session)
            : fileSource(target.name, target.history);
      if (closed) return void (await opened.close());
      const held = new SessionHistory(opened.base);
      setSource(opened);
      setHistory(held);
      setVersion(held.latest.version);
      stop = opened.follow(
        (changes) => {
          if (!held.append(changes)) return;
          if (liveRef.current) setVersion(held.latest.version);
          setTick((t) => t + 1);
        },
        (e) => setError(e.message),
        setConnection,
        // Its stored session was replaced: attach again (a new target object reruns this effect).
        () => setTarget((current) => current && { ...current }),
      );
      // A file delivers all it has at once: show its last version, or the one the link pinned.
      setVersion(liveRef.current ? held.latest.version : (pinned ?? held.latest.version));
      // The history before the latest view, read in the background: then the page can scrub back to it.
      const earlier = opened.earlier;
      if (!earlier) return;
      setLoadingEarlier(true);
      try {
        const changes = await earlier();
        if (closed) return;
        held.prepend(emptyView(opened.base.id, opened.base.limits), changes);
        setTick((t) => t + 1);
        if (!liveRef.current && pinned !== undefined) setVersion(pinned);
      } finally {
        if (!closed) setLoadingEarlier(false);
      }
    };
    open().catch((e: unknown) => setError((e as Error).message));
    return () => {
      closed = true;
      stop();
      void opened?.close();
    };
  }, [target, options]);

  useEffect(() => {
    setWriter(undefined);
    setParked(0);
    const ask = source?.writer;
    if (!ask) return;
    let current = true;
    // With no writer, whether open work waits for one includes the parked waits in storage (not in the view).
    const countParked = source?.readParkedWaits;
    const check = () =>
      void ask().then(
        (state) => {
          if (!current) return;
          setWriter((before) =>
            before && JSON.stringify(before.state) === JSON.stringify(state)
              ? before
              : { state, since: Date.now() },
          );
          if (state.state === "none" && countParked)
            countParked(undefined, 1).then(
              (page) => current && setParked(page.parked),
              () => undefined,
            );
        },
        () => undefined,
      );
    check();
    const timer = setInterval(check, 2_000);
    return () => {
      current = false;
      clearInterval(timer);
    };
  }, [source]);

  const latest = history?.latest.version ?? 0;
  // The attached session, its tab, a pinned version and the selected task are in the URL, so a link opens the
  // page as it is and a reload keeps it (an edge token never is in it). A file cannot be linked.
  useEffect(() => {
    if (!target || target.kind === "file") return;
    const params = new URLSearchParams(location.search);
    for (const key of ["local", "edge", "session"]) params.delete(key);
    if (target.kind === "local") params.set("local", target.database);
    else params.set("edge", target.url);
    params.set("session", target.session);
    params.set("tab", tab);
    if (live) params.delete("v");
    else params.set("v", String(version));
    if (selectedTask) params.set("task", selectedTask);
    else params.delete("task");
    window.history.replaceState(null, "", `${location.pathname}?${params}`);
  }, [target, tab, live, version, selectedTask]);
  // "Now" for ages on the page: taken again at each new commit and every 5 s (a stuck run's idle time grows).
  const [clockTick, setClockTick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setClockTick((t) => t + 1), 5_000);
    return () => clearInterval(timer);
  }, []);
  // biome-ignore lint/correctness/useExhaustiveDependencies: a new commit or a tick is what makes it stale
  const wallNow = useMemo(() => Date.now(), [latest, clockTick]);
  const shown = live ? latest : version;
  // biome-ignore lint/correctness/useExhaustiveDependencies: the history grows in place; `latest` marks each new commit
  const open = useMemo(() => history && openWork(history.latest, parked), [history, latest, parked]);
  // Ages and durations of a past version are as of its commit: what was still running then is drawn to then.
  const now = shown === latest ? wallNow : (history?.commit(shown)?.at ?? wallNow);
  // biome-ignore lint/correctness/useExhaustiveDependencies: the history grows in place; `latest` marks each new commit
  const view = useMemo(() => history?.viewAt(shown), [history, shown, latest, tick]);
  // biome-ignore lint/correctness/useExhaustiveDependencies: the history grows in place; `latest` marks each new commit
  const recovery = useMemo(
    () => (history ? recoveryLane(history.commits, history.base) : new Map<number, RecoveryMark[]>()),
    [history, latest, tick],
  );
  // The preview and the version it was asked at: asked again at each new commit, it says which it is of.
  const [preview, setPreview] = useState<{ plan: RecoveryPlan; version: number } | undefined>(undefined);
  useEffect(() => {
    let current = true;
    setPreview(undefined);
    if (tab !== "wake" || !source?.previewRecovery || shown !== latest) return;
    source
      .previewRecovery()
      .then((plan) => current && setPreview({ plan, version: latest }))
      .catch((e: unknown) => setError((e as Error).message));
    return () => {
      current = false;
    };
  }, [source, shown, latest, tab]);

  return (
    <>
      <header>
        <h1>durable-agent devtools</h1>
        <AttachForm initial={target ?? linked} onAttach={setTarget} />
        <ImportFile onAttach={setTarget} onError={setError} />
      </header>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {write && (
        <p
          class={write.ok === undefined ? "meta" : write.ok ? "done" : "error"}
          role={write.ok === false ? "alert" : "status"}
          data-testid="write-outcome"
          data-ok={write.ok === undefined ? "pending" : String(write.ok)}
        >
          {write.ok === false ? `not written: ${write.text}` : write.text}
        </p>
      )}
      {!target && <SessionList onAttach={setTarget} />}
      {history && view && (
        <>
          <ScrubberBar
            history={history}
            view={view}
            latest={latest}
            shown={shown}
            live={live}
            onLive={setLive}
            onScrub={(v) => {
              setLive(false);
              setVersion(v);
            }}
            writer={writer}
            open={open}
            loadingEarlier={loadingEarlier}
            connection={connection}
            source={source}
          />
          <TabList tab={tab} onTab={setTab} />
          <div role="tabpanel" class="panel">
            {tab === "submissions" && (
              <SubmissionsView
                view={view}
                now={now}
                onCancel={
                  source?.cancelSubmission &&
                  ((id) => {
                    if (confirm(`Cancel submission ${id}? This writes to the session.`))
                      void attemptWrite(`cancelled submission ${id}`, () => source.cancelSubmission?.(id));
                  })
                }
              />
            )}
            {tab === "conversation" && <ConversationView view={view} older={source} />}
            {tab === "tasks" && (
              <TaskGraph
                view={view}
                history={history}
                selected={selectedTask}
                onSelect={setSelectedTask}
                now={now}
                older={source}
                prices={options.prices}
                pricesFrom={options.pricesFrom}
              />
            )}
            {tab === "pending" && (
              <PendingView
                view={view}
                now={now}
                onAnswer={
                  source?.answerWait && shown === latest
                    ? (key, suggested) => {
                        const text = prompt(
                          `Payload for ${key} (JSON). Sending it writes to the session.`,
                          suggested,
                        );
                        if (text === null) return;
                        let payload: unknown;
                        try {
                          payload = JSON.parse(text);
                        } catch {
                          setWrite({ ok: false, text: `not JSON: ${text}` });
                          return;
                        }
                        if (!confirm(`Send ${text} to ${key}? The waiting task continues with it.`)) return;
                        const requestId = `devtools-${crypto.randomUUID()}`;
                        void attemptWrite(`sent ${text} to ${key} (request ${requestId})`, () =>
                          source.answerWait?.(key, payload, requestId),
                        );
                      }
                    : undefined
                }
                parked={source?.readParkedWaits && shown === latest ? source.readParkedWaits : undefined}
                early={source?.readEarlySignals}
                onDrop={
                  source?.dropEarlySignal && shown === latest
                    ? (key) => {
                        if (!confirm(`Drop the signal kept for ${key}? No wait will take it.`))
                          return undefined;
                        return attemptWrite(`dropped the signal kept for ${key}`, () =>
                          source.dropEarlySignal?.(key),
                        );
                      }
                    : undefined
                }
              />
            )}
            {tab === "documents" && <DocumentsView view={view} history={history} />}
            {tab === "timeline" && (
              <TimelineView
                commits={history.commits}
                version={view.version}
                recovery={recovery}
                // Over every task the history holds (a Submission's tree leaves the latest view once it settled
                // long ago; its line must still say it had problems), kept as commits come, not recounted.
                below={history.problems}
                onScrub={(v) => {
                  setLive(false);
                  setVersion(v);
                }}
                onTask={(taskId) => {
                  setSelectedTask(taskId);
                  setTab("tasks");
                }}
              />
            )}
            {tab === "wake" && (
              <WakeView
                view={view}
                preview={preview}
                canPreview={source?.previewRecovery !== undefined}
                isLatest={shown === latest}
              />
            )}
          </div>
        </>
      )}
    </>
  );
}

/** Renders the devtools into `root`. */
export function mountDevtools(root: HTMLElement, options: DevtoolsOptions = {}): void {
  render(<Devtools options={options} />, root);
}
