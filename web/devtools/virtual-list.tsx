/**
 * A list that renders only the rows in and near its scrolling area once it is long: a timeline of 20,000
 * commits costs what one of 40 does. Rows keep their natural height: each rendered row is measured and the
 * list places the others by those heights (a first guess until a row has been on screen). A short list is
 * rendered whole, so the page's own find and a screen reader's list reading work as usual. Arrow keys,
 * Home, End, Page Up and Page Down move between rows (the first control of each), scrolling as they go.
 */

import type { ComponentChildren, JSX } from "preact";
import { useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";

/** Lists up to this many rows are rendered whole. */
export const RENDER_ALL_UNDER = 200;
/** Rows rendered beyond each edge of the scrolling area, in px. */
const OVERSCAN_PX = 600;

export interface VirtualListProps<T> {
  readonly items: readonly T[];
  readonly keyOf: (item: T) => string | number;
  /** A first guess of a row's height in px, until it has been measured. */
  readonly estimate: (item: T) => number;
  readonly render: (item: T, index: number) => ComponentChildren;
  /** The list element: `ul` (default) or `ol` (whose rows keep their number). */
  readonly as?: "ul" | "ol";
  /** Attributes of the list element (class, data-testid, …). */
  readonly list?: { readonly class?: string; readonly "data-testid"?: string };
  readonly rowClass?: (item: T) => string | undefined;
  /** The number an `ol` shows for a row (default its position). */
  readonly numberOf?: (item: T, index: number) => number;
  /** Height of the scrolling area of a long list, in px. */
  readonly viewport?: number;
  /** The scrolling area's accessible name. */
  readonly label: string;
}

export function VirtualList<T>(props: VirtualListProps<T>) {
  const { items, keyOf, estimate } = props;
  const viewport = props.viewport ?? 560;
  const virtual = items.length > RENDER_ALL_UNDER;
  const scroller = useRef<HTMLElement>(null);
  const listElement = useRef<HTMLElement>(null);
  const measured = useRef(new Map<string | number, number>());
  const [measures, setMeasures] = useState(0);
  const [scrollTop, setScrollTop] = useState(0);
  const focusNext = useRef<number | undefined>(undefined);

  // Each row's top, by measured heights where known: offsets[i] is row i's top, offsets[n] the whole height.
  // biome-ignore lint/correctness/useExhaustiveDependencies: `measures` counts changes to the measured heights
  const offsets = useMemo(() => {
    if (!virtual) return undefined;
    const tops = new Float64Array(items.length + 1);
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as T;
      tops[i + 1] = (tops[i] as number) + (measured.current.get(keyOf(item)) ?? estimate(item));
    }
    return tops;
  }, [items, virtual, measures]);

  let first = 0;
  let last = items.length;
  if (offsets) {
    first = Math.max(0, rowAt(offsets, scrollTop - OVERSCAN_PX));
    last = Math.min(items.length, rowAt(offsets, scrollTop + viewport + OVERSCAN_PX) + 1);
  }

  // A row's height with its margins; false when it is what was assumed.
  const measure = (row: HTMLElement): boolean => {
    const item = items[Number(row.dataset.index)];
    if (item === undefined || !row.isConnected) return false;
    const style = getComputedStyle(row);
    const height =
      row.offsetHeight + Number.parseFloat(style.marginTop) + Number.parseFloat(style.marginBottom);
    const key = keyOf(item);
    if (measured.current.get(key) === height) return false;
    measured.current.set(key, height);
    return true;
  };
  // Each rendered row is watched: measured when it first renders and whenever its height changes (a record
  // opened inside it), before the browser paints.
  const observer = useRef<ResizeObserver | undefined>(undefined);
  const observed = useRef(new Set<Element>());
  const measureRef = useRef(measure);
  measureRef.current = measure;
  const controlOf = (index: number) =>
    listElement.current
      ?.querySelector<HTMLElement>(`:scope > [data-index="${index}"]`)
      ?.querySelector<HTMLElement>("button, a, input, select, [tabindex]");

  useLayoutEffect(() => {
    const list = listElement.current;
    if (list && offsets) {
      observer.current ??= new ResizeObserver((entries) => {
        let resized = false;
        for (const entry of entries) if (measureRef.current(entry.target as HTMLElement)) resized = true;
        if (resized) setMeasures((m) => m + 1);
      });
      const rendered = new Set<Element>(list.children);
      for (const row of observed.current) if (!rendered.has(row)) observer.current.unobserve(row);
      for (const row of rendered) if (!observed.current.has(row)) observer.current.observe(row);
      observed.current = rendered;
    }
    // A row moved to by keyboard that was not rendered yet: focused once it is.
    const target = focusNext.current;
    const control = target === undefined ? undefined : controlOf(target);
    if (control) {
      focusNext.current = undefined;
      control.focus({ preventScroll: true });
    }
  });
  useLayoutEffect(() => () => observer.current?.disconnect(), []);

  const moveTo = (index: number) => {
    const target = Math.max(0, Math.min(items.length - 1, index));
    const area = scroller.current;
    if (offsets && area) {
      const top = offsets[target] as number;
      const bottom = offsets[target + 1] as number;
      if (top < area.scrollTop) area.scrollTop = top;
      else if (bottom > area.scrollTop + area.clientHeight) area.scrollTop = bottom - area.clientHeight;
      setScrollTop(area.scrollTop);
    }
    const control = controlOf(target);
    if (control) control.focus({ preventScroll: true });
    else focusNext.current = target; // rendered by the scroll above, then focused
  };

  const onKeyDown = (event: KeyboardEvent) => {
    const row = (event.target as HTMLElement).closest<HTMLElement>("[data-index]");
    if (!row || row.parentElement !== listElement.current) return;
    const index = Number(row.dataset.index);
    const page = Math.max(1, Math.floor(viewport / 40));
    const moves: Record<string, number> = {
      ArrowDown: index + 1,
      ArrowUp: index - 1,
      Home: 0,
      End: items.length - 1,
      PageDown: index + page,
      PageUp: index - page,
    };
    const next = moves[event.key];
    if (next === undefined) return;
    event.preventDefault();
    moveTo(next);
  };

  const Tag = props.as ?? "ul";
  const rows: JSX.Element[] = [];
  for (let i = first; i < last; i++) {
    const item = items[i] as T;
    rows.push(
      <li
        key={keyOf(item)}
        data-index={i}
        class={props.rowClass?.(item)}
        {...(Tag === "ol" && { value: props.numberOf?.(item, i) ?? i + 1 })}
        {...(offsets && {
          "aria-posinset": i + 1,
          "aria-setsize": items.length,
          style: { position: "absolute", top: `${offsets[i]}px`, left: 0, right: 0 },
        })}
      >
        {props.render(item, i)}
      </li>,
    );
  }
  const list = (
    <Tag
      {...props.list}
      ref={listElement as never}
      {...(offsets && { style: { position: "relative", height: `${offsets[items.length]}px`, margin: 0 } })}
    >
      {rows}
    </Tag>
  );
  if (!offsets)
    return (
      // biome-ignore lint/a11y/noStaticElementInteractions: arrow keys move between the rows' own controls
      <div onKeyDown={onKeyDown}>{list}</div>
    );
  return (
    <section
      class="virtual-scroller"
      ref={scroller}
      // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling area must take focus to be scrolled by keyboard
      tabIndex={0}
      aria-label={props.label}
      style={{ maxHeight: `${viewport}px`, overflowY: "auto", position: "relative" }}
      onScroll={(event) => setScrollTop(event.currentTarget.scrollTop)}
      onKeyDown={onKeyDown}
    >
      {list}
    </section>
  );
}

/** The row whose span holds `y` (by binary search over the tops). */
function rowAt(offsets: Float64Array, y: number): number {
  let low = 0;
  let high = offsets.length - 2;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if ((offsets[mid] as number) <= y) low = mid;
    else high = mid - 1;
  }
  return Math.max(0, low);
}
