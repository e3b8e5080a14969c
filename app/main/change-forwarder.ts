import { isOurPage } from './ipc-gate.js';

/** What main forwards: the notice's two fields, rebuilt, so nothing else the runtime might attach rides along. */
export interface ForwardedNotice {
  readonly seq: number;
  readonly topics: readonly string[];
}

/** The window main would send to, as the pure rule needs it (no Electron import; see forwardTo in main.ts). */
export interface ForwardTarget {
  /** webContents.getURL(): the top frame's address now. */
  readonly url: string;
  send(notice: ForwardedNotice): void;
}

/**
 * The desktop's side of the change feed: each notice goes to our window only while its top frame
 * shows our bundled page (the IPC gate's rule, from the other direction), and webContents.send
 * reaches that top frame only. No window, or a window showing anything else, hears nothing; the
 * subscription is never dropped for it (IPC to a renderer does not back up in main).
 */
export function createChangeForwarder(options: {
  pageUrl: string;
  target: () => ForwardTarget | undefined;
  onNotice?: (notice: ForwardedNotice) => void;
}) {
  return {
    notice(notice: ForwardedNotice): boolean {
      const forwarded: ForwardedNotice = { seq: notice.seq, topics: [...notice.topics] };
      const target = options.target();
      if (target !== undefined && isOurPage(target.url, options.pageUrl)) target.send(forwarded);
      options.onNotice?.(forwarded);
      return true;
    },
    dropped(): void {
      // The feed closes only with the runtime, on quit.
    },
  };
}
