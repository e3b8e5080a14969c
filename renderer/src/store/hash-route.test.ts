import { describe, expect, it } from 'vitest';
import { actionHref, parseHashRoute } from './hash-route.js';

describe('the hash route', () => {
  it.each([
    ['', { kind: 'none' }],
    ['#/activity', { kind: 'tab', tab: 'activity' }],
    ['#metrics', { kind: 'tab', tab: 'metrics' }],
    ['#/action/act_0123abcd', { kind: 'action', actionId: 'act_0123abcd' }],
    ['#/action/ses_1', { kind: 'none' }],
    ['#/action/act_x/more', { kind: 'none' }],
    ['#/Activity<script>', { kind: 'none' }],
  ])('reads %j as %j', (hash, route) => {
    expect(parseHashRoute(hash)).toEqual(route);
  });

  it('round-trips an action id through its link', () => {
    expect(parseHashRoute(actionHref('act_e2e-seed_0001'))).toEqual({ kind: 'action', actionId: 'act_e2e-seed_0001' });
  });
});
