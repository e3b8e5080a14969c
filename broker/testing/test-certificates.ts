import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Certificates made at test time with the openssl CLI (P-256, short-lived), in `dir`. */
export interface TestCertificates {
  readonly caPem: string;
  readonly caFile: string;
  /** Signed by the CA for IP:127.0.0.1 and DNS:localhost, valid now. */
  readonly good: KeyPair;
  /** Signed by the CA for DNS:wrong.example only. */
  readonly wrongName: KeyPair;
  /** Signed by the CA for 127.0.0.1, valid only in January 2020. */
  readonly expired: KeyPair;
  /** Self-signed for 127.0.0.1 (no CA vouches for it). */
  readonly selfSigned: KeyPair;
}
export interface KeyPair {
  readonly key: string;
  readonly cert: string;
}

export function opensslAvailable(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function makeTestCertificates(dir: string): TestCertificates {
  makeCa(dir);
  const good = makeLeaf(dir, 'good', 'IP:127.0.0.1,DNS:localhost', ['-days', '1']);
  const wrongName = makeLeaf(dir, 'wrong', 'DNS:wrong.example', ['-days', '1']);
  const expired = makeLeaf(dir, 'expired', 'IP:127.0.0.1', [
    '-startdate',
    '20200101000000Z',
    '-enddate',
    '20200102000000Z',
  ]);
  openssl(
    dir,
    'req',
    '-x509',
    ...ecKey,
    '-keyout',
    'self.key',
    '-out',
    'self.pem',
    '-days',
    '1',
    '-subj',
    '/CN=127.0.0.1',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
  );
  const selfSigned = {
    key: readFileSync(join(dir, 'self.key'), 'utf8'),
    cert: readFileSync(join(dir, 'self.pem'), 'utf8'),
  };
  return {
    caPem: readFileSync(join(dir, 'ca.pem'), 'utf8'),
    caFile: join(dir, 'ca.pem'),
    good,
    wrongName,
    expired,
    selfSigned,
  };
}

const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

/** The test CA (ca.key, ca.pem) and the files `openssl ca` keeps its state in. */
function makeCa(dir: string): void {
  openssl(
    dir,
    'req',
    '-x509',
    ...ecKey,
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=Postern Test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  );
  writeFileSync(join(dir, 'index.txt'), '');
  writeFileSync(join(dir, 'serial'), '01\n');
  writeFileSync(
    join(dir, 'ca.cnf'),
    [
      '[ ca ]',
      'default_ca = test',
      '[ test ]',
      'dir = .',
      'database = ./index.txt',
      'new_certs_dir = .',
      'serial = ./serial',
      'default_md = sha256',
      'policy = p',
      'copy_extensions = copy',
      'unique_subject = no',
      '[ p ]',
      'commonName = supplied',
      '',
    ].join('\n'),
  );
}

/** A certificate the test CA signs for `san`. */
function makeLeaf(dir: string, name: string, san: string, dates: string[]): KeyPair {
  openssl(
    dir,
    'req',
    '-new',
    ...ecKey,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    `/CN=${name}`,
    '-addext',
    `subjectAltName=${san}`,
  );
  // `openssl ca` takes explicit start/end dates, which is how an expired certificate is made without faketime.
  openssl(
    dir,
    'ca',
    '-batch',
    '-config',
    'ca.cnf',
    '-cert',
    'ca.pem',
    '-keyfile',
    'ca.key',
    '-in',
    `${name}.csr`,
    '-out',
    `${name}.pem`,
    '-notext',
    ...dates,
  );
  return {
    key: readFileSync(join(dir, `${name}.key`), 'utf8'),
    cert: readFileSync(join(dir, `${name}.pem`), 'utf8'),
  };
}
