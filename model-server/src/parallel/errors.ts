/**
 * The one error type of the expert-parallel layer. Codes:
 *   bad_placement  a placement that does not cover every expert or names a rank outside the group
 *   bad_routing    routing ids outside [0, E) or a shape that does not match the step
 *   capacity       a step larger than the low-latency mode's fixed capacity, or a transport mailbox
 *   transport      a peer did not arrive in time, or a message that does not parse
 *   rank_failed    a rank failed inside a collective step: the group is out of step and refuses more
 *
 * @example
 *   throw new EpError("capacity", `128 tokens exceed the low-latency capacity of 64 per rank`);
 */
export type EpErrorCode = "bad_placement" | "bad_routing" | "capacity" | "transport" | "rank_failed";

export class EpError extends Error {
  override readonly name = "EpError";
  constructor(
    readonly code: EpErrorCode,
    message: string,
  ) {
    super(message);
  }
}
