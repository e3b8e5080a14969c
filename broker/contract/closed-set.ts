/**
 * Closed sets are `as const` objects whose keys equal their values; the union type is derived from
 * the object, so adding a member in one place updates every switch that must handle it.
 */
export type ClosedSet<T extends string> = { readonly [K in T]: K };

export function isMember<T extends string>(set: ClosedSet<T>, value: unknown): value is T {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(set, value);
}

export function members<T extends string>(set: ClosedSet<T>): readonly T[] {
  return Object.keys(set) as T[];
}
