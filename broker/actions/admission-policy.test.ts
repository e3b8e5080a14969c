import { describe, expect, it } from 'vitest';
import { parseConfig } from '../config/load-config.js';
import { admissionPolicy } from './admission-policy.js';
import { normalizeHttpRequest } from './http-action-request.js';

/** Writes on a card in a per-document lane, reads unattended; a key contract, a lookup, a read-back and a retry policy. */
const config = parseConfig(
  [
    'version: 1',
    'routes:',
    '  - name: docs',
    '    base_url: https://api.example.com/v1',
    '    credential: docs-token',
    '    injection: bearer',
    '    methods: [POST, PATCH]',
    '    approval: per_call',
    '    rules_may_loosen: true',
    '    rules:',
    "      - { methods: [POST], path: '/documents/{id}/**', approval: per_call, lane: 'document-{id}' }",
    '    idempotency:',
    '      header: Idempotency-Key',
    '      scope: docs.account',
    '      retention_seconds: 3600',
    '      fingerprint: [method, path, body]',
    '    correlation:',
    '      request_fields: [external_ref]',
    '      read_back:',
    '        path: /documents',
    '        query: {external_ref: "{external_ref}"}',
    '        items: /data',
    '        match: [external_ref]',
    '    lookup:',
    '      method: HEAD',
    '      path: /operations/{idempotency_key}',
    '    retry:',
    '      attempts_max: 3',
    '      automatic: false',
    '      backoff_ms: 0',
    '      lease_seconds: 30',
    '',
  ].join('\n'),
);
const route = config.routes.get('docs');
const post = normalizeHttpRequest({ route: 'docs', method: 'POST', path: '/documents/7/publish' });
const lookup = normalizeHttpRequest({ route: 'docs', method: 'HEAD', path: '/operations/key-1' });

describe('admissionPolicy', () => {
  it("when an agent's request is admitted, the route's rule, lane, approval and retry budget apply", () => {
    if (route === undefined) throw new Error('the fixture declares route docs');
    expect(admissionPolicy(route, post, {})).toEqual({
      methods: ['POST', 'PATCH'],
      lane: 'document-7',
      approval: 'per_call',
      approvalRule: expect.stringMatching(/^rules\[0\]: POST/),
      retryBudget: 3,
      retriesAllowed: true,
    });
  });

  it("when a reconciliation lookup is admitted: approval none, no lane, rule or budget, the lookup's methods, no retries", () => {
    if (route === undefined) throw new Error('the fixture declares route docs');
    expect(admissionPolicy(route, lookup, { reconciles: 'act_1' })).toEqual({
      methods: ['POST', 'PATCH', 'HEAD', 'GET'],
      lane: null,
      approval: 'none',
      reconciles: 'act_1',
      retriesAllowed: false,
    });
  });
});
