import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  CodeSource,
  ErrorCode,
  errorCodeMeanings,
  errorCodeRegistry,
  hostHttpStatus,
  meaningsFrom,
  type CodeSource as Source,
} from '../broker/contract/index.js';
import { errorCodesPage } from '../broker/contract/error-codes-page.js';

const sources = Object.keys(CodeSource) as Source[];

describe('the one error-code registry', () => {
  it('docs/error-codes.md is the page generated from it (run: node --import tsx scripts/write-error-codes.mjs)', () => {
    const committed = readFileSync(new URL('../docs/error-codes.md', import.meta.url), 'utf8');
    // toBe on two strings prints the line diff, so a stale page says exactly what changed.
    expect(committed).toBe(errorCodesPage());
  });

  it('gives every code one single-line meaning and at least one source, each named once', () => {
    for (const [code, entry] of Object.entries(errorCodeRegistry)) {
      expect(code, code).toMatch(/^[A-Z][A-Z_]*[A-Z]$/);
      expect(entry.meaning.length, code).toBeGreaterThan(10);
      expect(entry.meaning, code).not.toMatch(/[\n|]/);
      expect(entry.from.length, code).toBeGreaterThan(0);
      expect(new Set(entry.from).size, code).toBe(entry.from.length);
      for (const source of entry.from) expect(sources, code).toContain(source);
    }
  });

  it('derives each surface subset from the registry, with the registry meanings', () => {
    for (const source of sources) {
      const subset = meaningsFrom(source);
      expect(Object.keys(subset).length, source).toBeGreaterThan(0);
      for (const [code, meaning] of Object.entries(subset)) {
        const entry = errorCodeRegistry[code as keyof typeof errorCodeRegistry];
        expect(entry.from, code).toContain(source);
        expect(meaning).toBe(entry.meaning);
      }
    }
    expect(Object.keys(ErrorCode)).toEqual(Object.keys(errorCodeMeanings));
  });

  it('when the host answers a code itself, that code has exactly one HTTP status', () => {
    expect(Object.keys(hostHttpStatus).sort()).toEqual(Object.keys(meaningsFrom('operator_host')).sort());
  });

  it('names the codes two surfaces share, so sharing one more is a reviewed decision', () => {
    // A shared code must mean the same on both surfaces; its wire string stays, a client switches on it.
    const shared = Object.entries(errorCodeRegistry)
      .filter(([, entry]) => entry.from.length > 1)
      .map(([code]) => code);
    // CONNECTION_FAILED: the SDK cannot open an MCP session on an accepted connection; `postern mcp` gives up when its
    // reconnections are accepted and never answered within --reconnect-for (mcp-relay.ts). The same meaning.
    // RATE_LIMITED is not shared: `postern mcp` (its queue while the broker is away, mcp-relay.ts) is the CLI, which the
    // `broker` source covers, as for CONNECTION_FAILED's `postern mcp` half — one surface, one meaning.
    // SHUTTING_DOWN: the desktop's IPC gate once quitting, and the agent socket to a new call while the broker drains
    // before stopping (shutdown-sequence.ts): nothing new is accepted, on either surface.
    expect(shared.sort()).toEqual([
      'CONNECTION_FAILED',
      'INTERNAL',
      'INVALID_ARGUMENT',
      'NOT_FOUND',
      'PAYLOAD_LIMIT',
      'SHUTTING_DOWN',
      'UNAUTHENTICATED',
    ]);
  });
});
