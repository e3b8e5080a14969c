import { afterEach, describe, expect, it } from 'vitest';
import { configSubjectId, type NewEvent } from '../contract/index.js';
import { project } from '../core/index.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';

/** CONFIG_APPLIED in a real SQLite journal: its own append path, the same chain, folded into no action or session. */
const opened: TempJournal[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.dispose();
});

const digest = `sha256:${'ab12'.repeat(16)}`;
const applied: NewEvent = {
  kind: 'CONFIG_APPLIED',
  action_id: configSubjectId(digest),
  payload: {
    digest,
    by: 'person:ann (cli, passphrase on tty)',
    how: 'accepted',
    restart_needed_for: ['results.retention_seconds'],
  },
};

/** The event with payload fields the schema does not allow (the journal must refuse it). */
const withPayload = (extra: Record<string, unknown>): NewEvent =>
  ({ ...applied, payload: { ...applied.payload, ...extra } }) as NewEvent;

describe('when a configuration applied without a restart is journaled', () => {
  it('appendConfig records it under a cfg_ subject with no session, ticket or lane, and the action projection skips it', async () => {
    const t = await openTempJournal();
    opened.push(t);
    const { event } = await t.journal.appendConfig(applied);
    expect(event).toMatchObject({
      kind: 'CONFIG_APPLIED',
      action_id: `cfg_${'ab12'.repeat(4)}`,
      payload: applied.payload,
    });
    expect(event).toMatchObject({ session_id: null, ticket: null, lane: null });
    const events = [...t.journal.events()];
    expect(events.map((e) => e.kind)).toEqual(['CONFIG_APPLIED']);
    expect(project(events).size).toBe(0);
    expect(t.journal.getAction(event.action_id)).toBeUndefined();
    expect(t.journal.stats().last_seq).toBe(event.seq);
  });

  it.each<[string, (j: TempJournal['journal']) => Promise<unknown>, string]>([
    ['through the action path', (j) => j.append(applied), 'kind'],
    ['through the session path', (j) => j.appendSession(applied), 'kind'],
    ['with an act_ subject', (j) => j.appendConfig({ ...applied, action_id: 'act_config_1' }), 'action_id'],
    [
      'with a payload field the schema does not name',
      (j) => j.appendConfig(withPayload({ text: 'routes: []' })),
      'payload',
    ],
    [
      'with a setting outside the start-bound set',
      (j) => j.appendConfig(withPayload({ restart_needed_for: ['agents'] })),
      'payload.restart_needed_for.0',
    ],
  ])('is refused %s, and nothing is written', async (_how, append, field) => {
    // The schemas' own refusals, a bad value's among them: checked in full (the suites' `both` fails a bad value's append).
    const t = await openTempJournal({ eventChecks: 'full' });
    opened.push(t);
    await expect(append(t.journal)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', field });
    expect([...t.journal.events()]).toEqual([]);
  });

  it('a SESSION_* or action event is refused through appendConfig', async () => {
    const t = await openTempJournal();
    opened.push(t);
    const ended: NewEvent = { kind: 'SESSION_ENDED', action_id: 'ses_alpha_1', payload: { reason: 'process_exited' } };
    await expect(t.journal.appendConfig(ended)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', field: 'kind' });
  });
});
