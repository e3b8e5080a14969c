export * from './project.js';
export * from './classify-outcome.js';
export * from './outcome-evidence.js';
export * from './decide-retry.js';
export * from './classify-restart.js';
