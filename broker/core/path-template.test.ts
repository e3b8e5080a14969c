import { describe, expect, it } from 'vitest';
import { fillTemplate, matchPathTemplate, pathTemplateProblem } from './path-template.js';

describe('matchPathTemplate', () => {
  it.each([
    ['/documents/{id}', '/documents/7', { id: '7' }],
    ['/documents/{id}', '/documents/7/publish', undefined],
    ['/documents/{id}/**', '/documents/7', { id: '7' }],
    ['/documents/{id}/**', '/documents/7/publish', { id: '7' }],
    ['/documents/{id}/**', '/documents/7/a/b/c', { id: '7' }],
    ['/documents/{id}/**', '/documents', undefined],
    ['/documents/{id}', '/documents/', undefined],
    ['/v1/*/items', '/v1/x/items', {}],
    ['/v1/*/items', '/v1/x/y/items', undefined],
    ['/**', '/', {}],
    ['/', '/', {}],
    ['/a/{x}/b/{y}', '/a/1/b/2', { x: '1', y: '2' }],
    ['/a', '/A', undefined],
  ])('when %s is matched against %s', (template, path, expected) => {
    expect(matchPathTemplate(template, path)).toEqual(expected);
  });
});

describe('pathTemplateProblem', () => {
  it.each([
    ['/documents/{id}/**', undefined],
    ['documents', 'a path template starts with /'],
    ['/a/**/b', '** may only be the last segment'],
    ['/a/x{id}', 'segment "x{id}" must be a whole {name}'],
    ['/a/{id}/{id}', 'parameter {id} appears twice'],
    ['/a//b', 'a path template has no empty segments'],
  ])('when the template is %s', (template, problem) => {
    expect(pathTemplateProblem(template)).toBe(problem);
  });
});

it('fills placeholders and leaves unknown ones visible', () => {
  expect(fillTemplate('document-{id}', { id: '7' })).toBe('document-7');
  expect(fillTemplate('/v1/operations/{idempotency_key}', {})).toBe('/v1/operations/{idempotency_key}');
});
