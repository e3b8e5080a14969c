import { describe, expect, it } from 'vitest';
import { decideRetry, type RetryRecord } from './decide-retry.js';

const fp = `sha256:${'a'.repeat(64)}`;
const other = `sha256:${'b'.repeat(64)}`;
const record = (over: Partial<RetryRecord>): RetryRecord => ({
  invocation_id: 'act_0000000001',
  outcome: 'unknown',
  retry: 'reconcile',
  request_fingerprint: fp,
  ...over,
});

describe('decideRetry (article 000 decide)', () => {
  it('when the result is stored, fetches it — whatever the outcome', () => {
    expect(
      decideRetry(record({ outcome: 'committed', retry: 'fetch_result' }), { idempotent: true, fingerprint: fp }),
    ).toEqual({
      kind: 'FETCH',
      invocation_id: 'act_0000000001',
    });
  });

  it('when not attempted with backoff, makes a new attempt', () => {
    expect(
      decideRetry(record({ outcome: 'not_attempted', retry: 'backoff' }), { idempotent: false, fingerprint: fp }).kind,
    ).toBe('RETRY_NEW_ATTEMPT');
  });

  it.each(['after_correction', 'never'] as const)('when not attempted with %s, stops for correction', (retry) => {
    expect(decideRetry(record({ outcome: 'not_attempted', retry }), { idempotent: true, fingerprint: fp }).kind).toBe(
      'STOP_FOR_CORRECTION',
    );
  });

  it('when unknown and the operation is idempotent, makes a new attempt', () => {
    expect(
      decideRetry(record({ outcome: 'unknown', retry: 'reconcile' }), { idempotent: true, fingerprint: other }).kind,
    ).toBe('RETRY_NEW_ATTEMPT');
  });

  it('when unknown under a key contract with the identical fingerprint, retries with the same key', () => {
    expect(decideRetry(record({ retry: 'same_idempotency_key' }), { idempotent: false, fingerprint: fp }).kind).toBe(
      'RETRY_SAME_KEY',
    );
  });

  it('when unknown under a key contract but the fingerprint changed, reconciles instead', () => {
    expect(decideRetry(record({ retry: 'same_idempotency_key' }), { idempotent: false, fingerprint: other }).kind).toBe(
      'RECONCILE',
    );
  });

  it('when unknown otherwise, reconciles', () => {
    expect(decideRetry(record({ retry: 'backoff' }), { idempotent: false, fingerprint: fp }).kind).toBe('RECONCILE');
  });

  it('when rejected with backoff, retries when allowed and carries Retry-After', () => {
    expect(
      decideRetry(record({ outcome: 'rejected', retry: 'backoff', retry_after_ms: 1500 }), {
        idempotent: true,
        fingerprint: fp,
      }),
    ).toEqual({
      kind: 'RETRY_WHEN_ALLOWED',
      after_ms: 1500,
    });
  });

  it.each([
    ['rejected', 'never'],
    ['rejected', 'after_correction'],
    ['committed', 'never'],
    ['committed', 'backoff'],
  ] as const)('when %s with %s, returns the recorded result', (outcome, retry) => {
    expect(decideRetry(record({ outcome, retry }), { idempotent: true, fingerprint: fp }).kind).toBe(
      'RETURN_RECORDED_RESULT',
    );
  });
});
