// Regenerates docs/postern-config.schema.json from the zod schema (broker/config/config-schema.ts).
// Run: node --import tsx scripts/write-config-schema.mjs
// broker/config/config-json-schema.test.ts fails when the committed file differs from this output.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { configJsonSchema } from '../broker/config/config-schema.ts';

const target = fileURLToPath(new URL('../docs/postern-config.schema.json', import.meta.url));
writeFileSync(target, `${JSON.stringify(configJsonSchema(), null, 2)}\n`);
console.log(`wrote ${target}`);
