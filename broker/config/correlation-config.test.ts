import { describe, expect, it } from 'vitest';
import { isCodedError } from '../contract/index.js';
import { parseConfig } from './load-config.js';

/** A route's `correlation` (issue 7): provider request id header, request fields, bounded read-back. */
function refusal(run: () => unknown): { code: string; field: string | undefined; message: string } {
  try {
    run();
  } catch (error) {
    if (isCodedError(error)) return { code: error.code, field: error.field, message: error.message };
    throw error;
  }
  throw new Error('expected a refusal');
}

const minimal = `version: 1
routes:
  - name: pay
    base_url: http://127.0.0.1:8080/api
    credential: pay-token
    injection: bearer
`;
const route = (extra: string): string => `${minimal}${extra}`;
const readBack = (over: Record<string, string> = {}): string => {
  const fields = {
    path: '/payments',
    query: '{external_ref: "{external_ref}"}',
    items: '/data',
    match: '[external_ref]',
    ...over,
  };
  return Object.entries(fields)
    .map(([k, v]) => `        ${k}: ${v}\n`)
    .join('');
};

describe('when a route declares correlations', () => {
  it('keeps the header, the fields and the read-back, with items_max defaulting to 100', () => {
    const text = route(
      `    correlation:\n      provider_request_id_header: X-Request-Id\n      request_fields: [external_ref, customer]\n      read_back:\n${readBack()}    lookup:\n      method: GET\n      path: /requests/{provider_request_id}\n`,
    );
    const r = parseConfig(text).routes.get('pay');
    expect(r?.correlation).toEqual({
      provider_request_id_header: 'X-Request-Id',
      request_fields: ['external_ref', 'customer'],
      read_back: {
        path: '/payments',
        query: { external_ref: '{external_ref}' },
        items: '/data',
        match: ['external_ref'],
        items_max: 100,
      },
    });
  });

  it('request_fields default to none, and a path placeholder may name a field', () => {
    expect(
      parseConfig(route('    correlation:\n      provider_request_id_header: x-request-id\n')).routes.get('pay')
        ?.correlation?.request_fields,
    ).toEqual([]);
    const text = route(
      `    correlation:\n      request_fields: [external_ref]\n      read_back:\n${readBack({ path: '/payments/by-ref/{external_ref}', query: '{}' })}`,
    );
    expect(parseConfig(text).routes.get('pay')?.correlation?.read_back?.path).toBe('/payments/by-ref/{external_ref}');
  });
});

describe('when a correlation is bad it is refused naming the field', () => {
  const withFields = (rb: string): string =>
    route(`    correlation:\n      request_fields: [external_ref]\n      read_back:\n${rb}`);
  it.each([
    [
      'a read-back path placeholder that is not a request field',
      withFields(readBack({ path: '/payments/{customer}' })),
      'routes[0].correlation.read_back.path',
    ],
    ['a malformed read-back path', withFields(readBack({ path: 'payments' })), 'routes[0].correlation.read_back.path'],
    [
      'a match field that is not a request field',
      withFields(readBack({ match: '[external_ref, customer]' })),
      'routes[0].correlation.read_back.match[1]',
    ],
    ['an empty match list', withFields(readBack({ match: '[]' })), 'routes[0].correlation.read_back.match'],
    [
      'an items pointer that is not a JSON pointer',
      withFields(readBack({ items: 'data' })),
      'routes[0].correlation.read_back.items',
    ],
    ['items_max of zero', withFields(readBack({ items_max: '0' })), 'routes[0].correlation.read_back.items_max'],
    ['items_max over 500', withFields(readBack({ items_max: '501' })), 'routes[0].correlation.read_back.items_max'],
    [
      'a query parameter with a bad name',
      withFields(readBack({ query: '{"a b": x}' })),
      'routes[0].correlation.read_back.query',
    ],
    ['an unknown read-back field', withFields(readBack({ limit: '5' })), 'routes[0].correlation.read_back'],
    [
      'a bad request field name',
      route('    correlation:\n      request_fields: ["a/b"]\n'),
      'routes[0].correlation.request_fields[0]',
    ],
    [
      'more than 8 request fields',
      route(`    correlation:\n      request_fields: [${Array.from({ length: 9 }, (_, i) => `f${i}`).join(', ')}]\n`),
      'routes[0].correlation.request_fields',
    ],
    [
      'a header name with a space',
      route('    correlation:\n      provider_request_id_header: "x request id"\n'),
      'routes[0].correlation.provider_request_id_header',
    ],
    [
      '{provider_request_id} in a lookup without the header',
      route('    lookup:\n      method: GET\n      path: /requests/{provider_request_id}\n'),
      'routes[0].lookup.path',
    ],
    [
      'an unknown lookup placeholder',
      route('    lookup:\n      method: GET\n      path: /requests/{request_id}\n'),
      'routes[0].lookup.path',
    ],
  ])('%s', (_when, text, field) => {
    const r = refusal(() => parseConfig(text));
    expect(r.code).toBe('CONFIG_INVALID');
    expect(r.field?.startsWith(field)).toBe(true);
    expect(r.message).toContain(r.field);
  });
});
