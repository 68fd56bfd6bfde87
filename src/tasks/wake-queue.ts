/** A min-heap of (time, task id): the earliest sleeper in O(log n), with stale entries skipped lazily. */
export class WakeQueue {
  private readonly heap: { at: number; id: string }[] = [];

  push(at: number, id: string): void {
    const heap = this.heap;
    heap.push({ at, id });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((heap[parent] as { at: number }).at <= at) break;
      [heap[i], heap[parent]] = [
        heap[parent] as { at: number; id: string },
        heap[i] as { at: number; id: string },
      ];
      i = parent;
    }
  }

  /** The earliest entry that `isCurrent` accepts; stale ones are dropped on the way. */
  peek(isCurrent: (at: number, id: string) => boolean): { at: number; id: string } | undefined {
    for (;;) {
      const top = this.heap[0];
      if (!top || isCurrent(top.at, top.id)) return top;
      this.pop();
    }
  }

  pop(): { at: number; id: string } | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let smallest = i;
        if (l < heap.length && (heap[l] as { at: number }).at < (heap[smallest] as { at: number }).at)
          smallest = l;
        if (r < heap.length && (heap[r] as { at: number }).at < (heap[smallest] as { at: number }).at)
          smallest = r;
        if (smallest === i) break;
        [heap[i], heap[smallest]] = [
          heap[smallest] as { at: number; id: string },
          heap[i] as { at: number; id: string },
        ];
        i = smallest;
      }
    }
    return top;
  }
}
