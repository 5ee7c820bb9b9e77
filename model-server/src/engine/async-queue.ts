/**
 * An unbounded single-consumer async queue: the engine pushes, one RPC stream
 * consumes with `for await`. `close()` ends the iteration after what is queued.
 *
 * @example
 * const q = createAsyncQueue<number>();
 * q.push(1); q.close();
 * for await (const x of q) console.log(x); // 1
 */
export interface AsyncQueue<T> extends AsyncIterable<T> {
  push(item: T): void;
  close(): void;
  readonly closed: boolean;
  readonly size: number;
}

export function createAsyncQueue<T>(): AsyncQueue<T> {
  const items: T[] = [];
  let closed = false;
  let wake: (() => void) | null = null;
  return {
    push(item) {
      if (closed) return;
      items.push(item);
      wake?.();
    },
    close() {
      closed = true;
      wake?.();
    },
    get closed() {
      return closed;
    },
    get size() {
      return items.length;
    },
    async *[Symbol.asyncIterator]() {
      for (;;) {
        if (items.length > 0) {
          yield items.shift()!;
          continue;
        }
        if (closed) return;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
      }
    },
  };
}
