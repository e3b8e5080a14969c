/**
 * One way to show a wall time everywhere a person reads the console — the page and main's decision dialog: the
 * viewer's local zone, 24-hour, the zone always named ("11:56:02 CET", "2026-12-03 11:56:02 CET"). The journal orders
 * by seq; a time is for a person to read, and a time without its zone is a guess. Pure: the time comes in as epoch
 * milliseconds. `zone` is for tests (an IANA name); the page uses the browser's own zone, main the system's.
 */
export interface TimeOptions {
  zone?: string | undefined;
  /** Show milliseconds (the event log, where several events share a second). */
  ms?: boolean | undefined;
}

function parts(ms: number, options: TimeOptions): Record<string, string> {
  const format = new Intl.DateTimeFormat('en-GB', {
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
    timeZoneName: 'short',
    ...(options.ms === true ? { fractionalSecondDigits: 3 as const } : {}),
    ...(options.zone === undefined ? {} : { timeZone: options.zone }),
  });
  return Object.fromEntries(format.formatToParts(ms).map((p) => [p.type, p.value]));
}

function clock(p: Record<string, string>): string {
  return `${p.hour}:${p.minute}:${p.second}${p.fractionalSecond === undefined ? '' : `.${p.fractionalSecond}`}`;
}

/** "11:56:02 CET": the time of day with its zone. */
export function clockTime(ms: number, options: TimeOptions = {}): string {
  const p = parts(ms, options);
  return `${clock(p)} ${p.timeZoneName}`;
}

/** "2026-12-03 11:56:02 CET": the date and time with its zone. */
export function dateTime(ms: number, options: TimeOptions = {}): string {
  const p = parts(ms, options);
  return `${p.year}-${p.month}-${p.day} ${clock(p)} ${p.timeZoneName}`;
}

/** The time of day without the zone, for a column whose heading names the zone (zoneName). */
export function clockOnly(ms: number, options: TimeOptions = {}): string {
  return clock(parts(ms, options));
}

/** The zone's short name at that moment ("CET", "UTC", "GMT-5"), for a column heading. */
export function zoneName(ms: number, options: TimeOptions = {}): string {
  return parts(ms, options).timeZoneName ?? '';
}
