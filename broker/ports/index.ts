export type { Clock } from './clock.js';
export type { IdSource } from './id-source.js';
export { systemClock } from './system-clock.js';
export { createRandomIdSource } from './random-id-source.js';
