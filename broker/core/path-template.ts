/**
 * Path templates name the parts of a route's path space that conflict (lanes) or that a lookup
 * operation fills in. Pure string work on already-normalized paths (see normalizeRequestPath):
 *   literal segments match themselves, `{name}` matches one non-empty segment and binds it,
 *   `*` matches one segment, and a final `**` matches zero or more remaining segments.
 */
export type PathParams = Readonly<Record<string, string>>;

const paramSegment = /^\{([A-Za-z_][A-Za-z0-9_]{0,63})\}$/;

/** The bound parameters when `path` matches `template`, otherwise undefined. */
export function matchPathTemplate(template: string, path: string): PathParams | undefined {
  const want = segmentsOf(template);
  const have = segmentsOf(path);
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i += 1) {
    const w = want[i] as string;
    if (w === '**') return i === want.length - 1 ? params : undefined;
    const h = have[i];
    if (h === undefined || h === '') return undefined;
    const param = paramSegment.exec(w);
    if (param !== null) params[param[1] as string] = h;
    else if (w !== '*' && w !== h) return undefined;
  }
  return have.length === want.length ? params : undefined;
}

/** Why a template is not well formed, or undefined when it is (used by the config loader). */
export function pathTemplateProblem(template: string): string | undefined {
  if (!template.startsWith('/')) return 'a path template starts with /';
  const segments = segmentsOf(template);
  const names = new Set<string>();
  for (const [i, s] of segments.entries()) {
    if (s === '**' && i !== segments.length - 1) return '** may only be the last segment';
    if (s === '' && segments.length > 1) return 'a path template has no empty segments';
    if (s.includes('{') || s.includes('}')) {
      const m = paramSegment.exec(s);
      if (m === null) return `segment "${s}" must be a whole {name}`;
      if (names.has(m[1] as string)) return `parameter {${m[1]}} appears twice`;
      names.add(m[1] as string);
    }
  }
  return undefined;
}

/** The parameter names a template binds, in order. */
export function pathTemplateParams(template: string): string[] {
  return segmentsOf(template).flatMap((s) => {
    const m = paramSegment.exec(s);
    return m === null ? [] : [m[1] as string];
  });
}

/** Fills `{name}` placeholders in any string (lane names, lookup paths) from bound parameters. */
export function fillTemplate(template: string, params: PathParams): string {
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]{0,63})\}/g, (whole, name: string) => params[name] ?? whole);
}

function segmentsOf(path: string): string[] {
  // "/" is the root: zero segments. "/a/b" → ["a", "b"].
  return path === '/' ? [] : path.slice(1).split('/');
}
