// Regenerates docs/error-codes.md from the one error-code registry (broker/contract/error-codes.ts).
// Run: node --import tsx scripts/write-error-codes.mjs
// tests/error-codes-doc.test.ts fails, and shows the diff, when the committed page differs from this output.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { errorCodesPage } from '../broker/contract/error-codes-page.ts';

const target = fileURLToPath(new URL('../docs/error-codes.md', import.meta.url));
writeFileSync(target, errorCodesPage());
console.log(`wrote ${target}`);
