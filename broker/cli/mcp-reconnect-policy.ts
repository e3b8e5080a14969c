// Apart from the relay, so the full program registers `mcp` (its help states the default) without loading it.

/** How the shim waits for a broker that went away: 100 ms doubling to 5 s, for at most 10 minutes. */
export interface ReconnectPolicy {
  readonly delayMsMin: number;
  readonly delayMsMax: number;
  /** 0: exit as soon as the broker goes away. */
  readonly giveUpMs: number;
}
export const reconnectPolicyDefault: ReconnectPolicy = { delayMsMin: 100, delayMsMax: 5_000, giveUpMs: 10 * 60_000 };
