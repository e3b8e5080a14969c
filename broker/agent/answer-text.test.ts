import { describe, expect, it } from 'vitest';
import type { AgentRefusal } from '../contract/index.js';
import { answerText } from './answer-text.js';

// The text block's error line names a field only when the error has one: '' (the whole input) names none.
describe('answerText error line', () => {
  const refusal = (field?: string): AgentRefusal => ({
    invocation_id: null,
    error: {
      code: 'VAULT_LOCKED',
      phase: 'validation',
      outcome: 'not_attempted',
      retry: 'backoff',
      message: 'the vault is locked',
      ...(field === undefined ? {} : { field }),
    },
  });
  const errorLineOf = (text: string): string | undefined => text.split('\n').find((l) => l.startsWith('error: '));

  it('names the field when there is one', () => {
    expect(errorLineOf(answerText('refused', refusal('route')))).toMatch(
      /^error: VAULT_LOCKED \(field: route\): the vault is locked/,
    );
  });

  it('prints no empty field for one of "" or none', () => {
    for (const field of ['', undefined]) {
      const line = errorLineOf(answerText('refused', refusal(field)));
      expect(line).toMatch(/^error: VAULT_LOCKED: the vault is locked/);
      expect(line).not.toContain('(field');
    }
  });
});
