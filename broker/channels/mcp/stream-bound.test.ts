import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../testing/fake-clock.js';
import { StreamMeter } from './stream-bound.js';

function meter(eventStream = true, bytesPerSecond = 1_000) {
  const clock = new FakeClock();
  return { clock, meter: new StreamMeter({ messageBytesMax: 100, bytesPerSecond, clock, eventStream }) };
}
const event = (dataBytes: number, newline = '\n') =>
  Buffer.from(`event: message${newline}data: ${'p'.repeat(dataBytes)}${newline}${newline}`);

describe('when a server sends outside a call', () => {
  it('an SSE event over the bound is caught even when it starts and ends inside one chunk', () => {
    expect(meter().meter.add(event(90))).toBe('stream_message_bytes');
    expect(meter().meter.add(event(60))).toBeUndefined();
  });

  it.each([
    ['LF', '\n'],
    ['CRLF', '\r\n'],
    ['CR', '\r'],
  ])('events end at a blank line (%s), also when the chunks split the line ends', (_, newline) => {
    const { meter: m, clock } = meter(true, 1e6);
    const bytes = Buffer.concat(Array.from({ length: 20 }, () => event(60, newline)));
    for (const byte of bytes) {
      clock.advance(1);
      expect(m.add(Buffer.from([byte]))).toBeUndefined();
    }
  });

  it('a JSON body is one message, however many chunks', () => {
    const { meter: m } = meter(false);
    expect(m.add(Buffer.alloc(60))).toBeUndefined();
    expect(m.add(Buffer.alloc(41))).toBe('stream_message_bytes');
  });

  it('small events faster than the rate break it once the burst (two messages) is spent; time refills it', () => {
    const { meter: m, clock } = meter(true, 100);
    const small = event(10);
    const burst = Math.floor(200 / small.length);
    for (let i = 0; i < burst; i++) expect(m.add(small)).toBeUndefined();
    clock.advance(1_000);
    for (let i = 0; i < Math.floor(100 / small.length); i++) expect(m.add(small)).toBeUndefined();
    expect(m.add(small)).toBe('stream_rate');
  });
});
