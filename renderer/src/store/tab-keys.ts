/**
 * The tab a key moves to in a tab list, per WAI-ARIA's tabs pattern: ArrowRight and ArrowLeft step (wrapping round),
 * Home goes to the first tab and End to the last. `index` is the selected tab's (-1 when none of them is: the
 * first-run guide has no tab). Null: the key is not the tab list's. Pure.
 */
export function tabKeyTarget(key: string, index: number, count: number): number | null {
  if (count === 0) return null;
  switch (key) {
    case 'Home':
      return 0;
    case 'End':
      return count - 1;
    case 'ArrowRight':
      return (index + 1 + count) % count;
    case 'ArrowLeft':
      return (Math.max(index, 0) - 1 + count) % count;
    default:
      return null;
  }
}
