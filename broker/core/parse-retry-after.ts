/**
 * Retry-After (RFC 9110 §10.2.3): delta-seconds or an HTTP-date, turned into a bounded wait in ms.
 * Pure: the current time comes in as an argument. Only the IMF-fixdate form is accepted for dates
 * (the form senders MUST generate); the obsolete RFC 850 / asctime forms give undefined, i.e. "no
 * timing advice", which is the safe reading. A date in the past means "now" (0).
 */
const deltaSeconds = /^\s*(\d{1,10})\s*$/;
const imfFixdate =
  /^\s*(Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT\s*$/;
const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

export function parseRetryAfterMs(
  value: string | undefined,
  nowMs: number,
  retryAfterMsMax: number,
): number | undefined {
  if (value === undefined) return undefined;
  const delta = deltaSeconds.exec(value);
  if (delta !== null) return Math.min(Number(delta[1]) * 1000, retryAfterMsMax);
  const date = imfFixdate.exec(value);
  if (date === null) return undefined;
  const [, , day, mon, year, hh, mm, ss] = date as unknown as [
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  const h = Number(hh);
  const m = Number(mm);
  const s = Number(ss);
  const d = Number(day);
  if (h > 23 || m > 59 || s > 60 || d < 1 || d > 31) return undefined;
  const atMs = (daysFromCivil(Number(year), months.indexOf(mon) + 1, d) * 86_400 + h * 3600 + m * 60 + s) * 1000;
  return Math.min(Math.max(0, atMs - nowMs), retryAfterMsMax);
}

/** Days since 1970-01-01 for a proleptic Gregorian date (H. Hinnant's days_from_civil). */
function daysFromCivil(y: number, m: number, d: number): number {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}
