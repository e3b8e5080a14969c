import { describe, expect, it } from 'vitest';
import type { AuditVerifyResult } from '../../../broker/contract/index.js';
import { initialIntegrityView, integrityLine, integrityReducer, progressText } from './integrity-reducer.js';

const ok = (at: number): Extract<AuditVerifyResult, { ok: true }> => ({
  ok: true,
  checked_at_ms: at,
  events: 12,
  root: 'ab',
  checkpoints: 3,
  last_checkpoint_size: 12,
  unsigned_tail: 0,
  key_source: 'vault',
});
const bad = (at: number): Extract<AuditVerifyResult, { ok: false }> => ({
  ok: false,
  checked_at_ms: at,
  code: 'ROW_MODIFIED',
  seq: 5,
  message: 'row 5 does not hash to its leaf',
});

describe('the integrity reducer', () => {
  it('when the broker has no result yet, it is loaded with none', () => {
    expect(
      integrityReducer(initialIntegrityView, { type: 'last_received', reply: { ok: true, value: { last: null } } }),
    ).toMatchObject({ loaded: true, last: null });
  });

  it('a verification in flight, then its result, replaces the last one', () => {
    const started = integrityReducer(
      { ...initialIntegrityView, loaded: true, last: ok(1) },
      { type: 'verify_started' },
    );
    expect(started.verifying).toBe(true);
    expect(integrityReducer(started, { type: 'verify_finished', reply: { ok: true, value: bad(2) } })).toMatchObject({
      verifying: false,
      last: bad(2),
    });
  });

  it('an older result read back later never replaces a newer one', () => {
    const view = { ...initialIntegrityView, loaded: true, last: bad(5) };
    expect(integrityReducer(view, { type: 'last_received', reply: { ok: true, value: { last: ok(4) } } }).last).toEqual(
      bad(5),
    );
    expect(integrityReducer(view, { type: 'last_received', reply: { ok: true, value: { last: null } } }).last).toEqual(
      bad(5),
    );
  });

  it('a failed call keeps the last result and shows the error', () => {
    const view = integrityReducer(
      { ...initialIntegrityView, loaded: true, last: ok(1), verifying: true },
      { type: 'verify_finished', reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'gone' } } },
    );
    expect(view).toMatchObject({ verifying: false, last: ok(1), error: { code: 'BROKER_UNREACHABLE' } });
  });
});

describe('when a verify is running in the broker', () => {
  it('its progress read back is shown, and the answer of the verify clears it', () => {
    const progress = { checked: 412_000, total: 1_000_000 };
    const running = integrityReducer(integrityReducer(initialIntegrityView, { type: 'verify_started' }), {
      type: 'last_received',
      reply: { ok: true, value: { last: null, progress } },
    });
    expect(running).toMatchObject({ verifying: true, progress });
    expect(progressText(progress)).toBe('41% (412000 of 1000000 events)');
    expect(progressText({ checked: 0, total: 0 })).toBe('starting');
    expect(integrityReducer(running, { type: 'verify_finished', reply: { ok: true, value: ok(3) } })).toMatchObject({
      verifying: false,
      progress: null,
      last: ok(3),
    });
  });

  it('a read with no run in progress clears a progress seen earlier (another window started it)', () => {
    const seen = { ...initialIntegrityView, loaded: true, progress: { checked: 1, total: 2 } };
    const after = integrityReducer(seen, { type: 'last_received', reply: { ok: true, value: { last: ok(9) } } });
    expect(after).toMatchObject({ progress: null, last: ok(9) });
  });
});

describe('the integrity line', () => {
  it.each<[string, AuditVerifyResult | null, { tone: string; headline: RegExp; detail: RegExp }]>([
    ['none yet', null, { tone: 'unverified', headline: /not verified/, detail: /No audit verify/ }],
    [
      'ok',
      ok(1),
      {
        tone: 'ok',
        headline: /^Journal verified$/,
        detail: /^12 events checked, 3 signed checkpoints \(all signed\)$/,
      },
    ],
    [
      'ok with an unsigned tail',
      { ...ok(1), events: 1, checkpoints: 1, unsigned_tail: 1 },
      {
        tone: 'ok',
        headline: /verified/,
        detail: /^1 event checked, 1 signed checkpoint \(1 after the last signed checkpoint\)$/,
      },
    ],
    [
      'ok while the vault was locked (the signing key not checked)',
      { ...ok(1), key_source: 'journal' },
      {
        tone: 'unverified',
        headline: /^Chain intact — signing key not checked$/,
        detail: /^12 events checked, 3 signed checkpoints \(all signed\), under the key the journal itself names$/,
      },
    ],
    [
      'a bad row',
      bad(1),
      { tone: 'failed', headline: /FAILED \(ROW_MODIFIED\)/, detail: /^first bad position: seq 5 — row 5/ },
    ],
    [
      'damage outside the rows',
      { ...bad(1), seq: null, code: 'DB_UNREADABLE' },
      { tone: 'failed', headline: /DB_UNREADABLE/, detail: /^outside the event rows/ },
    ],
  ])('when the last result is %s', (_when, last, expected) => {
    const line = integrityLine(last);
    expect(line.tone).toBe(expected.tone);
    expect(line.headline).toMatch(expected.headline);
    expect(line.detail).toMatch(expected.detail);
  });

  it('says the next step that fits: verify while unverified, keep and verify offline when it failed, unlock when the key was not checked, none when verified', () => {
    expect(integrityLine(null).next).toMatch(/^Verify now/);
    expect(integrityLine(bad(1)).next).toMatch(/postern audit verify/);
    expect(integrityLine(ok(1)).next).toBeNull();
    expect(integrityLine({ ...ok(1), key_source: 'journal' }).next).toMatch(/^Unlock the vault/);
  });
});
