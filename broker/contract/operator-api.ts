import { z } from 'zod';

/** The broker's health as the operator API reports it. */
export const brokerStatusSchema = z.object({
  version: z.string(),
  mode: z.enum(['desktop', 'headless']),
  started_at_ms: z.number().int(),
  data_dir: z.string(),
  journal: z.object({
    state: z.enum(['open', 'failed', 'closed']),
    events: z.number().int().nonnegative(),
    last_seq: z.number().int().nonnegative(),
    schema_version: z.number().int().nonnegative(),
    recovered_at_open: z.number().int().nonnegative(),
  }),
  actions: z.object({
    total: z.number().int().nonnegative(),
    in_flight: z.number().int().nonnegative(),
    unknown: z.number().int().nonnegative(),
  }),
  /** The credential vault's state (broker/vault); never anything secret. */
  vault: z.object({
    state: z.enum(['uninitialized', 'locked', 'unlocked']),
  }),
});
export type BrokerStatus = z.infer<typeof brokerStatusSchema>;

/**
 * Replies cross every process boundary in one shape (Signal's channels habit): a value, or a coded
 * error the other side can branch on.
 */
export type Reply<T> = { ok: true; value: T } | { ok: false; error: { code: string; message: string; field?: string } };

/**
 * The operator API, typed once. The headless HTTP host, the Electron IPC handlers, the preload
 * allow-list and the renderer client are all driven by this map, so a missing handler fails to
 * compile. Approving is an operator capability; agents can never reach this surface.
 */
export interface BrokerApi {
  status: { input: Record<string, never>; output: BrokerStatus };
}
export type BrokerApiMethod = keyof BrokerApi;
export const brokerApiMethods = ['status'] as const satisfies readonly BrokerApiMethod[];
