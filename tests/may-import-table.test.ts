import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { folderOf, mayImportTable } from '../scripts/eslint-layering.js';

/**
 * ARCHITECTURE.md's code map says what each folder may import; scripts/eslint-layering.js enforces
 * its own copy. This holds the two equal, row for row, so the document cannot drift from the rule.
 * A "may import" cell is: backticked folders (or prose such as "nothing of ours"), then, after the
 * first `;`, notes — "its tests: any broker folder" is the rule's testsAnyBroker.
 */
const root = path.resolve(import.meta.dirname, '..');

type Row = { folder: string; mayImport: string[]; testsAnyBroker: boolean };

function documentedRows(): Row[] {
  const lines = readFileSync(path.join(root, 'ARCHITECTURE.md'), 'utf8').split('\n');
  const header = lines.findIndex((line) => line.startsWith('| folder | what lives there | may import |'));
  if (header < 0) throw new Error('ARCHITECTURE.md: no code map table with a "may import" column');
  const rows: Row[] = [];
  for (let i = header + 2; lines[i]?.startsWith('|') === true; i++) {
    const line = lines[i] ?? '';
    // Cells are split on " | " (a `|` inside backticks, as in LOCK_EX|LOCK_NB, has no spaces round it).
    const first = line.slice(2, line.indexOf(' | '));
    const last = line.slice(line.lastIndexOf(' | ') + 3, line.lastIndexOf(' |'));
    const named = /`([^`]+)`/.exec(first)?.[1];
    if (named === undefined)
      throw new Error(`ARCHITECTURE.md line ${i + 1}: the folder cell names no folder in backticks`);
    // `bin/postern.mjs` is a file: its folder is the row. `./` is the repo root.
    let folder = named.replace(/\/$/, '') || '.';
    if (/\.[a-z]+$/.test(folder) && folder !== '.') folder = path.posix.dirname(folder);
    const semicolon = last.indexOf(';');
    const list = semicolon < 0 ? last : last.slice(0, semicolon);
    const mayImport = [...list.matchAll(/`([^`]+)`/g)].map((match) => match[1] ?? '');
    rows.push({ folder, mayImport: mayImport.sort(), testsAnyBroker: last.includes('its tests: any broker folder') });
  }
  return rows;
}

function ruleRows(): Row[] {
  return mayImportTable.map((row) => ({
    folder: row.folder,
    mayImport: [...row.mayImport].sort(),
    testsAnyBroker: row.testsAnyBroker === true,
  }));
}

const byFolder = (rows: Row[]): Row[] => [...rows].sort((a, b) => a.folder.localeCompare(b.folder));

describe('the may-import table in ARCHITECTURE.md', () => {
  it('has one row per folder', () => {
    const folders = documentedRows().map((row) => row.folder);
    expect(folders.filter((folder, i) => folders.indexOf(folder) !== i)).toEqual([]);
  });

  it('matches the ESLint rule exactly: the same folders, the same allow-lists, the same test allowance', () => {
    expect(byFolder(documentedRows())).toEqual(byFolder(ruleRows()));
  });

  it('names only folders that have a row of their own', () => {
    const folders = new Set(mayImportTable.map((row) => row.folder));
    const strays = mayImportTable.flatMap((row) =>
      row.mayImport.filter((target) => !folders.has(target)).map((target) => `${row.folder} → ${target}`),
    );
    expect(strays).toEqual([]);
  });

  it('gives every folder of broker/ that holds code a row', () => {
    const files = readdirSync(path.join(root, 'broker'), { recursive: true, encoding: 'utf8' })
      .filter((file) => /\.(ts|tsx|js|mjs)$/.test(file))
      .map((file) => `broker/${file.split(path.sep).join('/')}`);
    expect(files.length).toBeGreaterThan(100);
    expect(files.filter((file) => folderOf(file) === undefined)).toEqual([]);
  });
});
