import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { brokerStatusSchema } from '../broker/contract/index.js';

/**
 * The Status panel's journal badge is `badge journal-<state>` (renderer/src/views/status-panel.tsx); the page cannot
 * read its stylesheet in a render test, so its rules are read here.
 */
const css = readFileSync(path.join(import.meta.dirname, '..', 'renderer', 'src', 'styles.css'), 'utf8');

/** The selector list and body of the rule that names `.journal-<state>`. */
function ruleOf(state: string): { selectors: string; body: string } | undefined {
  const match = new RegExp(`(^[^{}]*\\.journal-${state}\\b[^{}]*)\\{([^}]*)\\}`, 'm').exec(css);
  return match === null ? undefined : { selectors: match[1] ?? '', body: match[2] ?? '' };
}

describe("the Status panel's journal badge styles", () => {
  it('give every journal state the contract names a rule, so none shows as a plain unknown badge', () => {
    for (const state of brokerStatusSchema.shape.journal.shape.state.options)
      expect(ruleOf(state), state).toBeDefined();
  });

  it('style closing as passing (dashed), never in the error rule of failed', () => {
    const closing = ruleOf('closing');
    expect(closing?.selectors).not.toMatch(/journal-failed|attention/);
    expect(closing?.body).toContain('border-style: dashed');
    expect(closing?.body).not.toContain('var(--bad)');
    expect(ruleOf('failed')?.body).toContain('var(--bad)');
  });
});
