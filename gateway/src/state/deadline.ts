/**
 * A hard deadline on a promise: shared state is an optimisation, so a call
 * that is slow is treated exactly like a call that failed.
 *
 * @example
 * await withDeadline(redis.publish(ch, msg), 5); // rejects with DeadlineError after 5 ms
 */
export class DeadlineError extends Error {
  readonly code = "deadline_exceeded";
  constructor(ms: number) {
    super(`shared state call exceeded its ${ms} ms deadline`);
  }
}

export function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(ms)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}
