import { describe, expect, it } from 'vitest';
import { providerRequestIdOf } from './provider-request-id.js';

const sent = {
  path: '/api/payments?api_key=Q-secret-value-1&page=2',
  headers: [
    ['authorization', 'Bearer T-secret-token.9'],
    ['content-type', 'application/json'],
  ] as const,
};

describe('providerRequestIdOf', () => {
  it('reads the configured header, whatever its case, when the value is a bounded id', () => {
    expect(providerRequestIdOf('X-Request-Id', { 'x-request-id': 'req_01HV:abc-9.z' }, sent)).toBe('req_01HV:abc-9.z');
    expect(providerRequestIdOf('x-request-id', { 'X-Request-Id': 'r1' }, sent)).toBe('r1');
    expect(providerRequestIdOf('X-Request-Id', { 'x-request-id': 'a'.repeat(200) }, sent)).toBe('a'.repeat(200));
  });

  it.each([
    ['no header is configured', undefined, { 'x-request-id': 'r1' }],
    ['the header is absent', 'X-Request-Id', { 'request-id': 'r1' }],
    ['the value is empty', 'X-Request-Id', { 'x-request-id': '' }],
    ['the value is over 200 characters', 'X-Request-Id', { 'x-request-id': 'a'.repeat(201) }],
    ['the value has a space', 'X-Request-Id', { 'x-request-id': 'req 1' }],
    ['the value has a slash or equals sign (base64, a path)', 'X-Request-Id', { 'x-request-id': 'cmVx/MQ==' }],
    ['the value is a list', 'X-Request-Id', { 'x-request-id': ['r1', 'r2'] }],
    ['the header appears twice under different cases', 'X-Request-Id', { 'x-request-id': 'r1', 'X-Request-Id': 'r2' }],
    ['the value echoes the bearer token', 'X-Request-Id', { 'x-request-id': 'T-secret-token.9' }],
    ['the value echoes part of a header the request sent', 'X-Request-Id', { 'x-request-id': 'application' }],
    ['the value echoes the query secret', 'X-Request-Id', { 'x-request-id': 'Q-secret-value-1' }],
  ])('records nothing when %s', (_when, header, response) => {
    expect(providerRequestIdOf(header, response, sent)).toBeUndefined();
  });
});
