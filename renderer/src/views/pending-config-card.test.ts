import { createElement } from 'react';
import { describe, expect, it } from 'vitest';
import type { ConfigEntryChange } from '../../../broker/contract/index.js';
import type { OperatorApi } from '../api/operator-api.js';
import { createAppStore } from '../store/app-store.js';
import type { PendingConfig } from '../store/config-reducer.js';
import { PendingConfigCard } from './pending-config-card.js';
import { refusingApi, renderView, textOf } from './render-test-support.js';

/** A note as config.pending carries it under an SSH command rule with a `*` (broker/config/config-diff.ts). */
const starNote =
  'each * is one word, possibly empty, of letters, digits and _ - . / : , @ + =: it crosses / (subdirectories match) but never takes a space or shell syntax';

function pendingWith(sshHosts: ConfigEntryChange[]): PendingConfig {
  return {
    trust: 'verified',
    untrusted_reason: null,
    accepted: { at_ms: 1_700_000_000_000, by: 'person:ann', how: 'accepted', digest: `sha256:${'1'.repeat(64)}` },
    restart_needed: false,
    accept_applies: 'next_start',
    change: {
      file: '/home/ann/.config/postern/postern.yaml',
      digest: `sha256:${'2'.repeat(64)}`,
      routes: [],
      ssh_hosts: sshHosts,
      mcp_servers: [],
      settings: [],
      invalid: null,
    },
  };
}

/** The card as a person reads it, after the store read `pending` from the broker (config.pending). */
async function rendered(pending: PendingConfig): Promise<{ html: string; text: string }> {
  const api: OperatorApi = { ...refusingApi(), 'config.pending': () => Promise.resolve({ ok: true, value: pending }) };
  const store = createAppStore(api);
  await store.getState().refreshConfigPending();
  // A server render reads a zustand store's initial state: this one's is the state after the read.
  const html = renderView(createElement(PendingConfigCard), { ...store, getInitialState: store.getState });
  return { html, text: textOf(html) };
}

describe('the pending configuration card', () => {
  it('shows the note config.pending carries under the SSH command rule it is about, and none under the others', async () => {
    const { html, text } = await rendered(
      pendingWith([
        {
          name: 'box',
          change: 'changed',
          fields: [
            { field: 'commands[0]', before: null, after: '{"command":"echo *"}', note: starNote },
            { field: 'commands[1]', before: null, after: '{"command":"uptime"}' },
          ],
        },
      ]),
    );
    expect(html).toContain('data-testid="config-change-host-box-commands[0]-note"');
    // Under its field, right after the value it is about.
    expect(text).toContain(`commands[0]: {"command":"echo *"} | ${starNote}`);
    expect(html).not.toContain('data-testid="config-change-host-box-commands[1]-note"');
    expect(text).toContain('commands[1]: {"command":"uptime"}');
    expect(text.split(starNote)).toHaveLength(2);
  });
});
