/**
 * Where times are formatted. Texts an agent or the terminal reads (error and refusal messages, `postern …` lines) write
 * an instant ISO UTC (isoTime); never raw epoch milliseconds, which nobody reads as a time. A structured field keeps the
 * number as data (`expires_at_ms`) for a machine, and the console formats it itself, as below.
 *
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

/** The last millisecond ISO writes with a four-digit year (9999-12-31T23:59:59.999Z). */
export const isoFourDigitYearsEndMs = 253_402_300_799_999;

/**
 * "2026-12-03T10:56:02.045Z": an instant ISO UTC, as agent-facing and terminal texts write it (what Date's toISOString
 * writes, without reaching for Date in pure code). A value outside 1970..9999 — the event schemas admit any whole
 * number, so a hand-made journal may carry one — is named as the number it is rather than throwing while a refusal's
 * message is built.
 */
export function isoTime(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms > isoFourDigitYearsEndMs) return `epoch ms ${ms}`;
  const p = parts(ms, { zone: 'UTC', ms: true });
  return `${p.year}-${p.month}-${p.day}T${clock(p)}Z`;
}

/** Whether `zone` is a time zone this runtime can write times in (an IANA name such as "Europe/Berlin", or "UTC"). */
export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-GB', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}
