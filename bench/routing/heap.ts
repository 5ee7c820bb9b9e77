/** A binary min-heap of simulator events ordered by (time, insertion order). */
export interface Timed {
  t: number;
  seq: number;
}

type WithoutSeq<T> = T extends unknown ? Omit<T, "seq"> : never;

export class EventHeap<E extends Timed> {
  private items: E[] = [];
  private counter = 0;

  get size(): number {
    return this.items.length;
  }

  push(e: WithoutSeq<E>): void {
    const item = { ...e, seq: this.counter++ } as E;
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }

  pop(): E | undefined {
    const a = this.items;
    if (a.length === 0) return undefined;
    const top = a[0]!;
    const last = a.pop()!;
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && less(a[l]!, a[m]!)) m = l;
        if (r < a.length && less(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}

function less(x: Timed, y: Timed): boolean {
  return x.t < y.t || (x.t === y.t && x.seq < y.seq);
}
