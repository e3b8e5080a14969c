import type { NewEvent } from '../contract/index.js';
import type { DispatchGate, HeldObservations } from './dispatch-gate.js';

/**
 * A channel's observation appends (HTTP, SSH, MCP), fired from transport callbacks in the order seen (FIFO in the journal) and held
 * by it so they share one commit (appendLater; a gate without it is sent append): committed and awaited at the end of
 * the exchange (settled), or handed to the caller whose settlement they ride in (HeldObservations). Never chained:
 * the journal's queue keeps their order, and an observation never waits for the commit of the one before it.
 */
export class PendingAppends implements HeldObservations {
  private readonly pending: Promise<unknown>[] = [];
  private firstFailure: unknown = undefined;

  constructor(private readonly gate: DispatchGate) {}

  add(event: NewEvent): void {
    this.pending.push(
      (this.gate.appendLater?.(event) ?? this.gate.append(event)).catch((error: unknown) => {
        this.firstFailure ??= error;
      }),
    );
  }

  failure(): unknown {
    return this.firstFailure;
  }

  async settled(): Promise<unknown> {
    if (this.pending.length > 0) this.gate.commitHeld?.();
    await Promise.all(this.pending);
    return this.firstFailure;
  }
}
