import { describe, expect, it } from 'vitest';
import { resolveLane, type LaneRouteView } from './resolve-lane.js';

const docs: LaneRouteView = {
  name: 'docs',
  reads_bypass_lanes: true,
  lanes: [
    { methods: ['PATCH', 'POST', 'DELETE'], path: '/documents/{id}/**', lane: 'document-{id}' },
    { methods: ['*'], path: '/deploy/{env}', lane: 'deploy-{env}' },
  ],
};

describe('resolveLane', () => {
  it.each([
    [
      'PATCH /documents/7 and POST /documents/7/publish share a lane',
      'PATCH',
      '/documents/7',
      { kind: 'lane', lane: 'document-7', rule: 0 },
    ],
    ['POST /documents/7/publish', 'POST', '/documents/7/publish', { kind: 'lane', lane: 'document-7', rule: 0 }],
    ['another document is another lane', 'POST', '/documents/8/publish', { kind: 'lane', lane: 'document-8', rule: 0 }],
    ['a read bypasses lanes when the route says so', 'GET', '/documents/7', { kind: 'bypass' }],
    ['a wildcard method rule takes any write', 'PUT', '/deploy/prod', { kind: 'lane', lane: 'deploy-prod', rule: 1 }],
    ['an unmatched write shares the route lane', 'POST', '/other', { kind: 'lane', lane: 'route:docs', rule: null }],
    [
      'a method the rule does not name falls to the route lane',
      'PUT',
      '/documents/7',
      { kind: 'lane', lane: 'route:docs', rule: null },
    ],
  ])('when %s', (_when, method, path, expected) => {
    expect(resolveLane(docs, method, path)).toEqual(expected);
  });

  it('when reads do not bypass lanes, a read takes the lane its rule names', () => {
    const strict = { ...docs, reads_bypass_lanes: false };
    expect(resolveLane(strict, 'GET', '/deploy/prod')).toEqual({ kind: 'lane', lane: 'deploy-prod', rule: 1 });
    expect(resolveLane(strict, 'GET', '/documents/7')).toEqual({ kind: 'lane', lane: 'route:docs', rule: null });
  });
});
