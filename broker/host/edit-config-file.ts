import { readFileSync } from 'node:fs';
import { isMap, isSeq, parseDocument, type Document } from 'yaml';
import { CodedError, type ConfigEdit } from '../contract/index.js';
import { configBytesMax, parseConfig } from '../config/index.js';
import { writeAtomically } from './write-atomically.js';

/** What the file says after an edit: the names the broker runs with once it is in force (at once, or at the next start). */
export interface EditedConfig {
  file: string;
  routes: string[];
  ssh_hosts: string[];
  /** The whole text written: the caller records it as the accepted configuration (config-integrity.ts). */
  text: string;
}

export interface EditConfigOptions {
  /**
   * Called with the file's text as read for this edit ('' when absent), before anything changes:
   * throws (CONFIG_PENDING) when it holds a change no person accepted, which the edit would
   * otherwise carry into the accepted configuration.
   */
  checkBase?: (text: string) => void;
}

/**
 * Applies one edit to the configuration file through the `yaml` library (the document keeps its
 * comments and layout), checks the whole result with the same parser the broker loads it with
 * (schema and cross-field rules: a bad edit is CONFIG_INVALID naming the field, and nothing is
 * written), then replaces the file atomically (temp file, fsync, rename; 0600). The file is re-read
 * now, so an edit made by hand since the start is kept once a person accepted it (`checkBase`
 * refuses one nobody accepted). Whether the running broker applies it is the caller's (config-integrity.ts `edited`).
 */
export function editConfigFile(file: string, edit: ConfigEdit, options: EditConfigOptions = {}): EditedConfig {
  const current = readCurrent(file);
  options.checkBase?.(current ?? '');
  const doc = parseDocument(current ?? 'version: 1\n', { uniqueKeys: true });
  if (doc.errors.length > 0)
    throw new CodedError('CONFIG_INVALID', 'the configuration file is not valid YAML now; fix it by hand first', {
      field: '',
    });
  if (doc.contents === null) doc.contents = doc.createNode({ version: 1 }) as never;
  if (!isMap(doc.contents))
    throw new CodedError('CONFIG_INVALID', 'the configuration file is not a mapping; fix it by hand first', {
      field: '',
    });
  switch (edit.op) {
    case 'add_route': {
      const { methods, ...route } = edit.route;
      add(doc, 'routes', { ...route, ...(methods === undefined ? {} : { methods }) });
      break;
    }
    case 'remove_route':
      remove(doc, 'routes', edit.name);
      break;
    case 'add_ssh_host': {
      const { port, ...host } = edit.host;
      add(doc, 'ssh_hosts', { ...host, ...(port === undefined ? {} : { port }) });
      break;
    }
    case 'remove_ssh_host':
      remove(doc, 'ssh_hosts', edit.name);
      break;
  }
  const text = doc.toString();
  if (Buffer.byteLength(text) > configBytesMax)
    throw new CodedError('PAYLOAD_LIMIT', `the configuration file would pass ${configBytesMax} bytes`, { field: '' });
  // The whole file, as the next start will read it (CA files included): refused as a whole or written.
  const checked = parseConfig(text, file);
  writeAtomically(file, text);
  return { file, routes: [...checked.routes.keys()], ssh_hosts: [...checked.sshHosts.keys()], text };
}

/** The file's text; undefined when it does not exist yet. */
function readCurrent(file: string): string | undefined {
  try {
    const bytes = readFileSync(file);
    if (bytes.length > configBytesMax)
      throw new CodedError('PAYLOAD_LIMIT', `the configuration file is over ${configBytesMax} bytes`, { field: '' });
    return bytes.toString('utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

function entries(doc: Document, section: 'routes' | 'ssh_hosts') {
  const seq = doc.get(section);
  if (seq === undefined || seq === null) return undefined;
  if (!isSeq(seq))
    throw new CodedError('CONFIG_INVALID', `${section} is not a list in the file; fix it by hand first`, {
      field: section,
    });
  return seq;
}

function add(doc: Document, section: 'routes' | 'ssh_hosts', entry: { name: string } & Record<string, unknown>): void {
  const seq = entries(doc, section);
  const taken = seq?.items.some((item) => isMap(item) && item.get('name') === entry.name) ?? false;
  if (taken)
    throw new CodedError(
      'CONFIG_INVALID',
      `${section === 'routes' ? 'a route' : 'an SSH host'} named ${entry.name} already exists`,
      { field: `${section}.name` },
    );
  if (seq === undefined) doc.set(section, doc.createNode([entry]));
  else seq.add(doc.createNode(entry));
}

function remove(doc: Document, section: 'routes' | 'ssh_hosts', name: string): void {
  const seq = entries(doc, section);
  const index = seq?.items.findIndex((item) => isMap(item) && item.get('name') === name) ?? -1;
  if (seq === undefined || index < 0)
    throw new CodedError('NOT_FOUND', `no ${section === 'routes' ? 'route' : 'SSH host'} named ${name} in the file`, {
      field: 'name',
    });
  seq.delete(index);
}
