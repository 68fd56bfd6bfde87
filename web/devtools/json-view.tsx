/**
 * A JSON value as a tree: objects and arrays fold (native <details>, so keyboard and screen readers know
 * them), every node names its path, and any value or path can be copied.
 */
import type { ComponentChildren } from "preact";

function copy(text: string): void {
  void navigator.clipboard?.writeText(text).catch(() => undefined);
}

function pathOf(parent: string, key: string | number): string {
  if (typeof key === "number") return `${parent}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key)
    ? parent
      ? `${parent}.${key}`
      : key
    : `${parent}[${JSON.stringify(key)}]`;
}

function CopyButtons({ path, value }: { path: string; value: unknown }) {
  return (
    <span class="json-copy">
      <button
        type="button"
        aria-label={`copy the value of ${path || "the root"}`}
        onClick={() => copy(JSON.stringify(value, null, 2))}
      >
        copy
      </button>
      {path && (
        <button type="button" aria-label={`copy the path ${path}`} onClick={() => copy(path)}>
          path
        </button>
      )}
    </span>
  );
}

function Node(props: { name: ComponentChildren; path: string; value: unknown; depth: number }) {
  const { value, path } = props;
  if (value !== null && typeof value === "object") {
    const entries: [string | number, unknown][] = Array.isArray(value)
      ? value.map((v, i) => [i, v])
      : Object.entries(value as Record<string, unknown>);
    const summary = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
    return (
      <li data-path={path}>
        <details open={props.depth < 2}>
          <summary>
            {props.name} <span class="meta">{summary}</span>
          </summary>
          {/* Outside the summary: a control inside another one is unreachable for assistive technology. */}
          <CopyButtons path={path} value={value} />
          <ul class="json">
            {entries.map(([key, child]) => (
              <Node
                key={String(key)}
                name={<code>{String(key)}</code>}
                path={pathOf(path, key)}
                value={child}
                depth={props.depth + 1}
              />
            ))}
          </ul>
        </details>
      </li>
    );
  }
  return (
    <li data-path={path}>
      {props.name}:{" "}
      <span class={`json-${value === null ? "null" : typeof value}`}>{JSON.stringify(value)}</span>{" "}
      <CopyButtons path={path} value={value} />
    </li>
  );
}

/** The tree of `value`, its root labelled `label`. */
export function JsonView({ value, label, testId }: { value: unknown; label: string; testId?: string }) {
  return (
    <ul class="json json-root" data-testid={testId}>
      <Node name={<strong>{label}</strong>} path="" value={value} depth={0} />
    </ul>
  );
}
