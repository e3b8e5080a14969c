import { createElement, type ReactElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import type { OperatorApi } from '../api/operator-api.js';
import { AppStoreContext, createAppStore, type AppStore } from '../store/app-store.js';

/**
 * A view rendered by React itself (react-dom/server) under a real app store, for what a view shows from given data.
 * The store's API answers nothing a render would need: any call it makes fails the test.
 */
export function renderView(element: ReactElement, store: AppStore = createAppStore(refusingApi())): string {
  return renderToStaticMarkup(createElement(AppStoreContext.Provider, { value: store }, element));
}

/**
 * The markup's text as a person reads it: a block's edge (a heading, a paragraph, a list item, a term or its
 * description) as " | ", inline tags dropped, entities decoded, whitespace runs as one space.
 */
export function textOf(html: string): string {
  return html
    .replace(/<\/?(?:h\d|p|li|dt|dd|ul|ol|dl|pre|header|article|section|div)\b[^>]*>/g, ' | ')
    .replace(/<[^>]*>/g, '')
    .replace(/&quot;/g, '"')
    .replace(/&#x27;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ')
    .replace(/ ?(?:\| ?)+/g, ' | ')
    .replace(/^ \| | \| $/g, '');
}

export function refusingApi(): OperatorApi {
  return Object.fromEntries(
    brokerApiMethods.map((m) => [
      m,
      () => {
        throw new Error(`a static render called ${m}`);
      },
    ]),
  ) as unknown as OperatorApi;
}
