import { describe, expect, it } from 'vitest';
import {
  describeRouteRule,
  resolveRoutePolicy,
  ruleTextCharsMax,
  type RoutePolicyView,
} from './resolve-route-policy.js';

/** One base URL, one route: reads unattended, writes on a card, document writes in their own lane. */
const docs: RoutePolicyView = {
  name: 'docs',
  approval: 'per_call',
  reads_bypass_lanes: true,
  lanes: [{ methods: ['*'], path: '/deploy/{env}', lane: 'deploy-{env}' }],
  rules: [
    { methods: ['GET', 'HEAD'], path: '/**', approval: 'none' },
    { methods: ['POST', 'PATCH', 'DELETE'], path: '/documents/{id}/**', approval: 'per_call', lane: 'document-{id}' },
    { methods: ['*'], path: '/drafts/*', approval: 'session' },
  ],
};

describe('resolveRoutePolicy', () => {
  it.each([
    [
      'a GET matches the read rule: no card, lanes bypassed',
      'GET',
      '/documents/7',
      { approval: 'none', lane: { kind: 'bypass' }, rule: 0 },
    ],
    [
      'a POST on the same route matches the write rule and its lane',
      'POST',
      '/documents/7/publish',
      { approval: 'per_call', lane: { kind: 'lane', lane: 'document-7', rule: null }, rule: 1 },
    ],
    [
      'a DELETE of another document is another lane',
      'DELETE',
      '/documents/8',
      { approval: 'per_call', lane: { kind: 'lane', lane: 'document-8', rule: null }, rule: 1 },
    ],
    [
      'a rule without a lane leaves the lane to lanes[]',
      'PUT',
      '/drafts/x',
      { approval: 'session', lane: { kind: 'lane', lane: 'route:docs', rule: null }, rule: 2 },
    ],
    [
      'an unmatched write falls back to the route approval and lanes[]',
      'PUT',
      '/deploy/prod',
      { approval: 'per_call', lane: { kind: 'lane', lane: 'deploy-prod', rule: 0 }, rule: null },
    ],
    [
      'a method the write rule does not name falls through',
      'PUT',
      '/documents/7',
      { approval: 'per_call', lane: { kind: 'lane', lane: 'route:docs', rule: null }, rule: null },
    ],
  ])('when %s', (_when, method, path, expected) => {
    const policy = resolveRoutePolicy(docs, method, path);
    expect({ approval: policy.approval, lane: policy.lane, rule: policy.rule?.index ?? null }).toEqual(expected);
  });

  it('when two rules match, the first one wins', () => {
    const both: RoutePolicyView = {
      ...docs,
      rules: [{ methods: ['*'], path: '/**', approval: 'session' }, ...(docs.rules ?? [])],
    };
    expect(resolveRoutePolicy(both, 'GET', '/documents/7')).toMatchObject({ approval: 'session', rule: { index: 0 } });
  });

  it('when a rule names a lane, it wins over the read bypass', () => {
    const laned: RoutePolicyView = {
      ...docs,
      rules: [{ methods: ['GET'], path: '/reports/{r}', approval: 'none', lane: 'report-{r}' }],
    };
    expect(resolveRoutePolicy(laned, 'GET', '/reports/q3').lane).toEqual({
      kind: 'lane',
      lane: 'report-q3',
      rule: null,
    });
  });

  it('when the filled lane is too long, the route lanes decide (never an unbounded lane name)', () => {
    const laned: RoutePolicyView = {
      ...docs,
      reads_bypass_lanes: false,
      rules: [{ methods: ['POST'], path: '/x/{id}', approval: 'per_call', lane: 'x-{id}' }],
    };
    expect(resolveRoutePolicy(laned, 'POST', `/x/${'a'.repeat(300)}`).lane).toEqual({
      kind: 'lane',
      lane: 'route:docs',
      rule: null,
    });
  });

  it('when the route has no rules, it is the route approval and resolveLane', () => {
    const plain: RoutePolicyView = { name: 'p', approval: 'session', reads_bypass_lanes: false, lanes: [] };
    expect(resolveRoutePolicy(plain, 'GET', '/')).toEqual({
      approval: 'session',
      lane: { kind: 'lane', lane: 'route:p', rule: null },
      rule: null,
    });
  });

  it('says which rule applied in words a person can read, bounded', () => {
    expect(resolveRoutePolicy(docs, 'PATCH', '/documents/7').rule?.text).toBe(
      'rules[1]: POST PATCH DELETE /documents/{id}/** → per_call',
    );
    const long = describeRouteRule(3, { methods: ['*'], path: `/${'p'.repeat(1000)}`, approval: 'none' });
    expect(long.length).toBe(ruleTextCharsMax);
    expect(long.endsWith('…')).toBe(true);
  });
});
