import { createPrivateKey, randomBytes } from 'node:crypto';
import ssh2 from 'ssh2';
import { CodedError } from '../contract/index.js';

type ParsedKey = ssh2.ParsedKey;

/** Passphrases of SSH keys are at most 1 KiB. */
export const sshKeyPassphraseBytesMax = 1_024;

/**
 * Checks that `secret` is an SSH private key ssh2 can use (OpenSSH openssh-key-v1, PEM, PPK) and
 * returns the bytes to seal: the key as given when it is not encrypted; decrypted once with
 * `passphrase` when it is (the passphrase is not kept, so the vault is the only lock on it).
 *
 * ssh2's parse errors are never passed on as `cause`: some quote bytes of the key file. Each
 * failure becomes our own fixed message naming the field to fix. ssh2 works on JS strings, which
 * cannot be zeroed; what we own as bytes we zero (the caller zeroes `secret`).
 */
export function importSshKey(secret: Uint8Array, passphrase: Uint8Array | undefined): Uint8Array {
  const keyBuffer = Buffer.from(secret.buffer, secret.byteOffset, secret.byteLength);
  const plain = ssh2.utils.parseKey(keyBuffer);
  if (!(plain instanceof Error)) return requirePrivate(plain, () => copyOf(secret));
  if (!/passphrase|encrypted/i.test(plain.message)) {
    throw new CodedError('INVALID_ARGUMENT', 'not an SSH private key in a supported format (OpenSSH, PEM or PPK)', {
      field: 'secret',
    });
  }
  if (passphrase === undefined || passphrase.length === 0) {
    throw new CodedError('INVALID_ARGUMENT', 'the SSH key is encrypted: give its passphrase to import it', {
      field: 'sshKeyPassphrase',
    });
  }
  if (passphrase.length > sshKeyPassphraseBytesMax) {
    throw new CodedError('PAYLOAD_LIMIT', `an SSH key passphrase is at most ${sshKeyPassphraseBytesMax} bytes`, {
      field: 'sshKeyPassphrase',
    });
  }
  const decrypted = ssh2.utils.parseKey(
    keyBuffer,
    Buffer.from(passphrase.buffer, passphrase.byteOffset, passphrase.byteLength),
  );
  if (decrypted instanceof Error) {
    throw new CodedError('INVALID_ARGUMENT', 'the SSH key could not be decrypted with this passphrase', {
      field: 'sshKeyPassphrase',
    });
  }
  return requirePrivate(decrypted, () => unencryptedForm(decrypted));
}

function requirePrivate(key: ParsedKey, bytes: () => Uint8Array): Uint8Array {
  if (!key.isPrivateKey())
    throw new CodedError('INVALID_ARGUMENT', 'this is a public key; the vault needs the private key', {
      field: 'secret',
    });
  return bytes();
}

/**
 * The decrypted key in a form ssh2 parses without a passphrase: ssh2's own PEM for RSA, ECDSA and
 * DSA (PKCS#1 / SEC1, which it reads back); for Ed25519 ssh2 only emits PKCS#8, which it cannot
 * read back, so we write an unencrypted openssh-key-v1. Either way the result is parsed again and
 * must have the same public key, so a wrong encoding fails here, not at the first connection.
 */
function unencryptedForm(key: ParsedKey): Uint8Array {
  const pem = key.getPrivatePEM();
  const candidate = key.type === 'ssh-ed25519' ? openSshEd25519(pem, key) : Buffer.from(pem, 'utf8');
  const reparsed = ssh2.utils.parseKey(candidate);
  if (reparsed instanceof Error || !reparsed.isPrivateKey() || !reparsed.getPublicSSH().equals(key.getPublicSSH())) {
    candidate.fill(0);
    throw new CodedError(
      'INVALID_ARGUMENT',
      `an encrypted ${key.type} key cannot be stored decrypted; decrypt it with ssh-keygen -p first`,
      {
        field: 'secret',
      },
    );
  }
  return candidate;
}

/** openssh-key-v1 with cipher "none" (PROTOCOL.key in OpenSSH), one Ed25519 key. */
function openSshEd25519(pkcs8Pem: string, key: ParsedKey): Buffer {
  const jwk = createPrivateKey(pkcs8Pem).export({ format: 'jwk' });
  if (jwk.d === undefined || jwk.x === undefined)
    throw new CodedError('INVALID_ARGUMENT', 'the Ed25519 key has no private part', { field: 'secret' });
  const seed = Buffer.from(jwk.d, 'base64url');
  const pub = Buffer.from(jwk.x, 'base64url');
  const check = randomBytes(4);
  const privateFields = [
    check,
    check,
    sshString(Buffer.from('ssh-ed25519')),
    sshString(pub),
    sshString(Buffer.concat([seed, pub])),
    sshString(Buffer.from(key.comment ?? '', 'utf8')),
  ];
  const unpadded = Buffer.concat(privateFields);
  const blockBytes = 8;
  const padding = Buffer.from(
    Array.from({ length: (blockBytes - (unpadded.length % blockBytes)) % blockBytes }, (_v, i) => i + 1),
  );
  const privateSection = Buffer.concat([unpadded, padding]);
  const body = Buffer.concat([
    Buffer.from('openssh-key-v1\0', 'latin1'),
    sshString(Buffer.from('none')),
    sshString(Buffer.from('none')),
    sshString(Buffer.alloc(0)),
    uint32(1),
    sshString(key.getPublicSSH()),
    sshString(privateSection),
  ]);
  const lines = body.toString('base64').match(/.{1,70}/g) ?? [];
  const text = Buffer.from(
    `-----BEGIN OPENSSH PRIVATE KEY-----\n${lines.join('\n')}\n-----END OPENSSH PRIVATE KEY-----\n`,
    'utf8',
  );
  for (const part of [seed, unpadded, privateSection, body, ...privateFields]) part.fill(0);
  return text;
}

function sshString(bytes: Buffer): Buffer {
  return Buffer.concat([uint32(bytes.length), bytes]);
}

function uint32(value: number): Buffer {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(value);
  return out;
}

function copyOf(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(bytes.length);
  out.set(bytes);
  return out;
}
