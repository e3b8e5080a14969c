import { createHttpOperatorApi } from './http-operator-api.js';
import type { OperatorApi } from './operator-api.js';
import { pagePassphrasePrompt, pageSessionOf } from './page-session.js';

/** Inside Electron the preload bridge is the API; in a browser on the headless host it is HTTP. */
export function selectOperatorApi(win: Window): OperatorApi {
  return win.postern ?? createHttpOperatorApi(win.fetch.bind(win), pageSessionOf(win), pagePassphrasePrompt());
}
