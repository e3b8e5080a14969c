/** A count's noun as a person writes it: "1 call", "2 calls", "0 calls" (regular plurals only). */
export function noun(count: number, singular: string, plural = `${singular}s`): string {
  return count === 1 ? singular : plural;
}
