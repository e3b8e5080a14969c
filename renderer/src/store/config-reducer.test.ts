import { describe, expect, it } from 'vitest';
import { configReducer, initialConfigView, parseMethods } from './config-reducer.js';

describe('the config reducer', () => {
  it('holds the loaded config, and keeps it beside a later error', () => {
    const config = { file: '/d/postern.yaml', routes: [], ssh_hosts: [], edited_since_start: false };
    const loaded = configReducer(configReducer(initialConfigView, { type: 'requested' }), { type: 'received', reply: { ok: true, value: config } });
    expect(loaded).toMatchObject({ phase: 'ready', config, error: null });
    expect(configReducer(loaded, { type: 'received', reply: { ok: false, error: { code: 'X', message: 'm' } } })).toMatchObject({ phase: 'error', config });
  });
});

describe('the config reducer: edits of the file', () => {
  it('an edit in flight, then written: the names the next start will load are kept', () => {
    const started = configReducer({ ...initialConfigView, confirming: 'route:docs' }, { type: 'edit_started', op: 'remove_route' });
    expect(started).toMatchObject({ editing: 'remove_route', confirming: null, edited: null });
    const file = { file: '/d/postern.yaml', routes: ['status'], ssh_hosts: [], applies: 'next_start' as const };
    expect(configReducer(started, { type: 'edit_finished', op: 'remove_route', reply: { ok: true, value: file } })).toMatchObject({ editing: null, edited: { ok: true, file } });
  });

  it('a refused edit shows the code and field', () => {
    const view = configReducer(configReducer(initialConfigView, { type: 'edit_started', op: 'add_route' }), {
      type: 'edit_finished',
      op: 'add_route',
      reply: { ok: false, error: { code: 'CONFIG_INVALID', message: 'routes[1].base_url: not a URL', field: 'routes[1].base_url' } },
    });
    expect(view.edited).toMatchObject({ ok: false, error: { code: 'CONFIG_INVALID', field: 'routes[1].base_url' } });
  });

  it.each([
    ['GET, post', ['GET', 'POST']],
    ['', []],
  ])('methods typed as %j are %j', (text, methods) => {
    expect(parseMethods(text)).toEqual(methods);
  });
});
