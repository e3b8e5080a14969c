/**
 * What the socket knows about sessions across connections: how many connections hold each session
 * (so the backend hears `sessionDisconnected` once, when the last one closes) and how many tool calls
 * each has waiting (the in-flight bound is per session, not per connection, so opening more
 * connections does not buy more concurrency).
 */
export class SessionRegistry {
  private readonly connections = new Map<string, number>();
  private readonly inFlight = new Map<string, number>();

  constructor(
    private readonly inFlightMax: number,
    private readonly lastConnectionClosed: (sessionId: string) => void,
  ) {}

  attach(sessionId: string): void {
    this.connections.set(sessionId, (this.connections.get(sessionId) ?? 0) + 1);
  }

  detach(sessionId: string): void {
    const left = (this.connections.get(sessionId) ?? 0) - 1;
    if (left > 0) {
      this.connections.set(sessionId, left);
      return;
    }
    this.connections.delete(sessionId);
    this.lastConnectionClosed(sessionId);
  }

  /** False when the session already has inFlightMax calls waiting; true means a slot was taken. */
  tryBeginCall(sessionId: string): boolean {
    const now = this.inFlight.get(sessionId) ?? 0;
    if (now >= this.inFlightMax) return false;
    this.inFlight.set(sessionId, now + 1);
    return true;
  }

  endCall(sessionId: string): void {
    const left = (this.inFlight.get(sessionId) ?? 0) - 1;
    if (left > 0) this.inFlight.set(sessionId, left);
    else this.inFlight.delete(sessionId);
  }

  connectionsOf(sessionId: string): number {
    return this.connections.get(sessionId) ?? 0;
  }
}
