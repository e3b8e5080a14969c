import { describe, expect, it } from 'vitest';
import { commandOf } from './command-of.js';

describe('commandOf (which command main.ts loads for)', () => {
  it('names the first word that is not an option, past --data-dir and its value', () => {
    expect(commandOf(['mcp'])).toBe('mcp');
    expect(commandOf(['mcp', '--reconnect-for', '0'])).toBe('mcp');
    expect(commandOf(['--data-dir', '/data', 'mcp'])).toBe('mcp');
    expect(commandOf(['--data-dir=/data', 'mcp', '--data-dir', '/other'])).toBe('mcp');
    expect(commandOf(['vault', 'list'])).toBe('vault');
    // A data directory named like a command is the option's value, not the command.
    expect(commandOf(['--data-dir', 'mcp', 'status'])).toBe('status');
  });

  it('names none where the full program must answer: help, version, an unknown option, no command', () => {
    expect(commandOf([])).toBeUndefined();
    expect(commandOf(['--help'])).toBeUndefined();
    expect(commandOf(['-h', 'mcp'])).toBeUndefined();
    expect(commandOf(['--version'])).toBeUndefined();
    expect(commandOf(['--bogus', 'mcp'])).toBeUndefined();
    expect(commandOf(['--data-dir'])).toBeUndefined();
  });
});
