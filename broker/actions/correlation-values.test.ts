import { describe, expect, it } from 'vitest';
import { parseConfig, type Route } from '../config/index.js';
import { correlationValues } from './correlation-values.js';

function routeWith(fields: string): Route {
  const config = parseConfig(
    [
      'version: 1',
      'routes:',
      '  - name: pay',
      '    base_url: http://127.0.0.1:8080/api',
      '    credential: pay-token',
      '    injection: bearer',
      '    correlation:',
      `      request_fields: ${fields}`,
      '',
    ].join('\n'),
  );
  return config.routes.get('pay') as Route;
}
const route = routeWith('[external_ref, customer, constructor]');
const body = (value: unknown): Buffer => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));

describe('correlationValues', () => {
  it('takes the declared top-level string and number fields, numbers as printed, and nothing else', () => {
    expect(
      correlationValues(route, body({ external_ref: 'inv-7', customer: 42, amount: 5, nested: { external_ref: 'x' } })),
    ).toEqual({ external_ref: 'inv-7', customer: '42' });
    expect(correlationValues(route, body({ customer: 1.5 }))).toEqual({ customer: '1.5' });
  });

  it.each([
    ['a value is an object, boolean, null or array', { external_ref: { id: 1 }, customer: true, constructor: null }],
    ['a value is empty or over 200 characters', { external_ref: '', customer: 'c'.repeat(201) }],
    ['the body is not JSON', 'external_ref=inv-7'],
    ['the body is a JSON array or string', [{ external_ref: 'inv-7' }]],
    ['the body is empty', ''],
    ['no field is declared present (inherited names are not fields)', { other: 'x' }],
  ])('gives nothing when %s', (_when, value) => {
    expect(correlationValues(route, body(value))).toBeUndefined();
  });

  it('keeps a value of exactly 200 characters, and keeps a field named like a prototype member as data', () => {
    const values = correlationValues(route, body({ external_ref: 'e'.repeat(200), constructor: 'ctor-1' }));
    expect(values).toEqual({ external_ref: 'e'.repeat(200), constructor: 'ctor-1' });
    expect(Object.getPrototypeOf(values)).toBe(Object.prototype);
  });

  it('reads nothing on a route without request fields', () => {
    expect(correlationValues(routeWith('[]'), body({ external_ref: 'inv-7' }))).toBeUndefined();
  });
});
