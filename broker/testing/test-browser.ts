/**
 * A person's (or an agent's) browser for the OAuth tests: follows redirects itself, keeps the cookies it is given
 * per host name — not per port, as browsers do — and sends them back, and tells the authorization server of
 * broker/testing/upstream-mcp/oauth-servers.ts which account is logged in there (`x-account`).
 */
export interface TestBrowser {
  /** GET `url`, following at most 5 redirects; every URL visited is in `visited`, the last one answered. */
  open(url: string): Promise<{ status: number; text: string; visited: string[] }>;
  /** GET `url` without following a redirect (the `location`, if any, is answered). */
  get(url: string): Promise<{ status: number; text: string; location: string | undefined }>;
}

const redirectsMax = 5;

export function createTestBrowser(account: string): TestBrowser {
  const jar = new Map<string, Map<string, string>>();
  const get = async (url: string): Promise<{ status: number; text: string; location: string | undefined }> => {
    const host = new URL(url).hostname;
    const cookies = jar.get(host) ?? new Map<string, string>();
    const cookie = [...cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    const response = await fetch(url, {
      redirect: 'manual',
      headers: { 'x-account': account, ...(cookie === '' ? {} : { cookie }) },
    });
    for (const line of response.headers.getSetCookie()) {
      const pair = line.split(';')[0] ?? '';
      const at = pair.indexOf('=');
      if (at > 0) cookies.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
    }
    jar.set(host, cookies);
    const location = response.headers.get('location') ?? undefined;
    return { status: response.status, text: await response.text(), location };
  };
  return {
    get,
    open: async (url) => {
      const visited = [url];
      let answer = await get(url);
      while (answer.location !== undefined && answer.status >= 300 && answer.status < 400) {
        if (visited.length > redirectsMax) throw new Error('too many redirects');
        const next = new URL(answer.location, visited.at(-1)).toString();
        visited.push(next);
        answer = await get(next);
      }
      return { status: answer.status, text: answer.text, visited };
    },
  };
}
