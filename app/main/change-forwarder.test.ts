import { describe, expect, it } from 'vitest';
import { appPageUrl } from './app-protocol.js';
import { createChangeForwarder, type ForwardedNotice } from './change-forwarder.js';

function forwarderTo(url: string | undefined) {
  const sent: ForwardedNotice[] = [];
  const heard: ForwardedNotice[] = [];
  const forwarder = createChangeForwarder({
    pageUrl: appPageUrl,
    target: () => (url === undefined ? undefined : { url, send: (notice) => sent.push(notice) }),
    onNotice: (notice) => heard.push(notice),
  });
  return { forwarder, sent, heard };
}

describe('the desktop change forwarder', () => {
  it('sends our own page the notice rebuilt from its two fields, and tells main (desktop notifications) too', () => {
    const { forwarder, sent, heard } = forwarderTo(`${appPageUrl}#/approvals`);
    const notice = Object.assign({ seq: 9, topics: ['approvals', 'activity'] }, { extra: 'never forwarded' });
    expect(forwarder.notice(notice)).toBe(true);
    expect(sent).toEqual([{ seq: 9, topics: ['approvals', 'activity'] }]);
    expect(sent[0]).not.toHaveProperty('extra');
    expect(heard).toEqual(sent);
  });

  it.each([
    ['no window', undefined],
    ['a window showing another page', 'https://example.com/'],
    ['a page on another app path', 'app://postern/other.html'],
  ])('with %s, sends nothing (and stays subscribed)', (_when, url) => {
    const { forwarder, sent, heard } = forwarderTo(url);
    expect(forwarder.notice({ seq: 1, topics: ['vault'] })).toBe(true);
    expect(sent).toEqual([]);
    expect(heard).toHaveLength(1);
  });
});
