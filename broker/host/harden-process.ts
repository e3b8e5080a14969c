import { loadNativeAddon } from './native-addon.js';

/**
 * What hardening left this process as, read back from the kernel. `hardened` is true only when the
 * process is non-dumpable (another process of the same user cannot read its memory through
 * /proc/<pid>/mem, ptrace or process_vm_readv) and its core file limit is 0.
 */
export interface ProcessHardening {
  readonly hardened: boolean;
  /** null: unknown (the addon could not run). */
  readonly dumpable: boolean | null;
  readonly coreLimit: number | null;
  /** Why not hardened: an error code or a short phrase, never anything secret. */
  readonly reason?: string;
}

/** The addon's export (native/peercred/index.d.ts), as loose as a missing or older build may be. */
export interface HardeningAddon {
  readonly hardenProcess?: unknown;
}

let done: ProcessHardening | undefined;

/**
 * Makes this process unreadable by other processes of the same user, once; later calls return the
 * first answer. Call it before the vault can be unlocked: a decrypted credential must never sit in
 * a readable process. Never throws: a broker whose addon is missing or too old still starts, and
 * the caller warns (`describeHardening`), because refusing to start would not make the secret safer.
 */
export function hardenProcess(): ProcessHardening {
  done ??= hardenWith(loadNativeAddon());
  return done;
}

/** The decision, with the addon passed in (the tests use it for a missing or failing addon). */
export function hardenWith(addon: HardeningAddon | Error): ProcessHardening {
  if (addon instanceof Error)
    return notHardened(`the addon postern-peercred did not load (${codeOf(addon) ?? 'no code'})`);
  if (typeof addon.hardenProcess !== 'function')
    return notHardened('the addon postern-peercred has no hardenProcess (rebuild it)');
  let answer: unknown;
  try {
    answer = (addon.hardenProcess as () => unknown)();
  } catch (error) {
    return notHardened(codeOf(error) ?? 'hardenProcess failed');
  }
  const { dumpable, coreLimit } = (answer ?? {}) as { dumpable?: unknown; coreLimit?: unknown };
  if (typeof dumpable !== 'boolean' || typeof coreLimit !== 'number')
    return notHardened('hardenProcess gave an unusable answer');
  const hardened = !dumpable && coreLimit === 0;
  if (hardened) return { hardened, dumpable, coreLimit };
  return { hardened, dumpable, coreLimit, reason: 'the kernel still reports the process dumpable or core dumps on' };
}

/** One log line for the operator: a fact, or a warning saying what an agent could do. */
export function describeHardening(result: ProcessHardening): string {
  if (result.hardened)
    return 'Process memory: not readable by other processes of this user (non-dumpable, core dumps off).';
  return (
    `warning: the broker could not protect its memory (${result.reason ?? 'unknown'}); ` +
    'another process of this user may be able to read decrypted credentials from it.'
  );
}

function notHardened(reason: string): ProcessHardening {
  return { hardened: false, dumpable: null, coreLimit: null, reason };
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code.slice(0, 64) : undefined;
}
