/**
 * Whether the desktop app may add Electron safeStorage as a second wrap around the vault's wrapped
 * key, given `safeStorage.getSelectedStorageBackend()` (Linux) or the platform's keychain. Pure, so
 * the policy is tested without Electron.
 *
 * - macOS Keychain and Windows DPAPI bind the blob to the user's login: worth adding.
 * - Linux `gnome_libsecret`, `kwallet*`: a real keyring unlocked by the login.
 * - Linux `basic_text`: Chromium encrypts with a hard-coded password; it protects nothing and
 *   would only suggest that it does. `unknown` (or anything else): we cannot tell, so no.
 *
 * The passphrase (Argon2id) stays the real lock either way: safeStorage only stops a copied
 * vault.sqlite from being attacked offline without the user's OS login as well.
 */
export type KeyProtectorDecision =
  { readonly use: true; readonly backend: string } | { readonly use: false; readonly reason: string };

const trustedBackends = new Set(['keychain', 'dpapi', 'gnome_libsecret', 'kwallet', 'kwallet5', 'kwallet6']);

export function chooseKeyProtector(backend: string): KeyProtectorDecision {
  if (backend === 'basic_text')
    return { use: false, reason: 'basic_text uses a hard-coded password, which protects nothing' };
  if (trustedBackends.has(backend)) return { use: true, backend };
  return { use: false, reason: `the storage backend "${backend}" is not one we can trust` };
}

/** The backend name for a platform: Linux asks safeStorage; macOS and Windows have one each. */
export function keyProtectorBackend(platform: string, linuxBackend: () => string): string {
  if (platform === 'darwin') return 'keychain';
  if (platform === 'win32') return 'dpapi';
  if (platform === 'linux') return linuxBackend();
  return 'unknown';
}
