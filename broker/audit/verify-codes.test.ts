import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { verifyCodeMeanings } from './verify-codes.js';

describe('the verify codes', () => {
  it('docs/audit.md lists exactly the codes of verify-codes.ts, with the same meanings', () => {
    const doc = readFileSync(new URL('../../docs/audit.md', import.meta.url), 'utf8');
    const section = doc.slice(doc.indexOf('## Verify codes'), doc.indexOf('## When the journal cannot append'));
    const rows = [...section.matchAll(/^\| `([A-Z_]+)` \| (.*) \|$/gm)].map((m) => [m[1], m[2]]);
    expect(Object.fromEntries(rows)).toEqual(verifyCodeMeanings);
  });
});
