export * from './project.js';
