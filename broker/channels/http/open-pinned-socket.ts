import { createHash } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns/promises';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect, rootCertificates, type TLSSocket } from 'node:tls';
import type { SetupFailure } from '../../core/index.js';
import { addressRefusal, allowedClassesFor, metadataHostNames } from './network-guard.js';

/** Where a connection goes: everything comes from the route, nothing from the agent. */
export interface ConnectionTarget {
  readonly protocol: 'http:' | 'https:';
  readonly hostname: string;
  readonly port: number;
  readonly caPem: string | undefined;
  readonly pins: readonly string[] | undefined;
}

export type SetupStage = 'dns' | 'tcp_connect' | 'tls_handshake';
export type LookupAll = (hostname: string) => Promise<ReadonlyArray<{ address: string; family: number }>>;

/** A fresh connection that failed before the application channel existed: provably nothing sent. */
export class SetupFailed extends Error {
  constructor(
    readonly failure: SetupFailure | 'cancelled',
    readonly stage: SetupStage,
    /** A short machine code (ECONNREFUSED, CERT_HAS_EXPIRED, pin_mismatch…), never a library message. */
    readonly detail: string,
  ) {
    super(`connection setup failed at ${stage} (${detail})`);
    this.name = 'SetupFailed';
  }
}

export interface OpenedSocket {
  readonly socket: Socket | TLSSocket;
  /** The one address, checked by the network guard, that the socket is connected to. */
  readonly address: string;
  /** sha256:hex of the peer certificate's DER bytes (https only). */
  readonly peerFingerprint: string | undefined;
  /** Stages completed, in order. */
  readonly stages: readonly SetupStage[];
}

export interface OpenOptions {
  readonly signal: AbortSignal;
  readonly connectTimeoutMs: number;
  readonly dnsAddressesMax: number;
  readonly lookup?: LookupAll;
}

const defaultLookup: LookupAll = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** OpenSSL verify codes and Node's identity check: the certificate itself was refused. */
const certificateCodes = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_SIGNATURE_FAILURE',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'INVALID_CA',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'pin_mismatch',
]);

/**
 * Connection setup done by the broker itself, so every stage is observed and the address is pinned:
 * resolve once (all addresses), refuse the whole answer if any address is forbidden (a mixed answer
 * is how DNS rebinding hides), connect to the first checked address only, then TLS with the route's
 * host name for SNI and identity, the route's extra CA and its pins. undici never resolves or
 * connects on its own (see http-connection.ts), so nothing can move the attempt to another address.
 */
export async function openPinnedSocket(target: ConnectionTarget, options: OpenOptions): Promise<OpenedSocket> {
  const stages: SetupStage[] = [];
  const address = await resolveChecked(target.hostname, options);
  stages.push('dns');
  const tcp = await connectTcp(address, target.port, options);
  stages.push('tcp_connect');
  if (target.protocol === 'http:') return { socket: tcp, address, peerFingerprint: undefined, stages };
  const { socket, fingerprint } = await handshake(tcp, target, options);
  stages.push('tls_handshake');
  return { socket, address, peerFingerprint: fingerprint, stages };
}

async function resolveChecked(hostname: string, options: OpenOptions): Promise<string> {
  checkCancelled(options.signal, 'dns');
  if (metadataHostNames.has(hostname.toLowerCase().replace(/\.$/, '')))
    throw new SetupFailed('address_forbidden', 'dns', 'metadata');
  const allowed = allowedClassesFor(hostname);
  let answers: ReadonlyArray<{ address: string }>;
  if (isIP(hostname) !== 0) answers = [{ address: hostname }];
  else {
    try {
      answers = await withTimeout((options.lookup ?? defaultLookup)(hostname), options, 'dns');
    } catch (error) {
      if (error instanceof SetupFailed) throw error;
      const code = errorCode(error);
      throw new SetupFailed(
        code === 'ENOTFOUND' || code === 'ENODATA' ? 'dns_not_found' : 'dns_temporary',
        'dns',
        code,
      );
    }
  }
  if (answers.length === 0) throw new SetupFailed('dns_not_found', 'dns', 'ENODATA');
  for (const { address } of answers.slice(0, options.dnsAddressesMax)) {
    const refused = addressRefusal(address, allowed);
    if (refused !== undefined) throw new SetupFailed('address_forbidden', 'dns', refused);
  }
  return (answers[0] as { address: string }).address;
}

function connectTcp(address: string, port: number, options: OpenOptions): Promise<Socket> {
  checkCancelled(options.signal, 'tcp_connect');
  return new Promise<Socket>((resolve, reject) => {
    const socket = netConnect({ host: address, port, noDelay: true });
    const fail = (failure: SetupFailure | 'cancelled', detail: string): void => {
      cleanup();
      socket.destroy();
      reject(new SetupFailed(failure, 'tcp_connect', detail));
    };
    const onError = (error: unknown): void => fail(tcpFailure(errorCode(error)), errorCode(error));
    const onAbort = (): void => fail('cancelled', 'cancelled');
    const timer = setTimeout(() => fail('connect_timeout', 'timeout'), options.connectTimeoutMs);
    const cleanup = (): void => {
      clearTimeout(timer);
      socket.off('error', onError);
      options.signal.removeEventListener('abort', onAbort);
    };
    socket.once('error', onError);
    options.signal.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => {
      cleanup();
      resolve(socket);
    });
  });
}

function handshake(
  tcp: Socket,
  target: ConnectionTarget,
  options: OpenOptions,
): Promise<{ socket: TLSSocket; fingerprint: string }> {
  checkCancelled(options.signal, 'tls_handshake', tcp);
  return new Promise((resolve, reject) => {
    const ipLiteral = isIP(target.hostname) !== 0;
    const socket = tlsConnect({
      socket: tcp,
      // Identity is checked against the route's host name, never the resolved address.
      host: target.hostname,
      ...(ipLiteral ? {} : { servername: target.hostname }),
      ...(target.caPem === undefined ? {} : { ca: [...rootCertificates, target.caPem] }),
      ALPNProtocols: ['http/1.1'],
      minVersion: 'TLSv1.2',
      rejectUnauthorized: true,
    });
    const fail = (failure: SetupFailure | 'cancelled', detail: string): void => {
      cleanup();
      socket.destroy();
      tcp.destroy();
      reject(new SetupFailed(failure, 'tls_handshake', detail));
    };
    const onError = (error: unknown): void => {
      const code = errorCode(error);
      fail(certificateCodes.has(code) ? 'tls_certificate' : 'tls_handshake', code);
    };
    const onAbort = (): void => fail('cancelled', 'cancelled');
    const onClose = (): void => fail('tls_handshake', 'ECONNRESET');
    const timer = setTimeout(() => fail('tls_handshake', 'timeout'), options.connectTimeoutMs);
    const cleanup = (): void => {
      clearTimeout(timer);
      socket.off('error', onError);
      socket.off('close', onClose);
      options.signal.removeEventListener('abort', onAbort);
    };
    socket.once('error', onError);
    socket.once('close', onClose);
    options.signal.addEventListener('abort', onAbort, { once: true });
    socket.once('secureConnect', () => {
      const der = socket.getPeerCertificate().raw;
      const fingerprint = `sha256:${createHash('sha256').update(der).digest('hex')}`;
      if (target.pins !== undefined && !target.pins.includes(fingerprint)) {
        fail('tls_certificate', 'pin_mismatch');
        return;
      }
      cleanup();
      resolve({ socket, fingerprint });
    });
  });
}

function withTimeout<T>(promise: Promise<T>, options: OpenOptions, stage: SetupStage): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new SetupFailed('cancelled', stage, 'cancelled'));
    };
    const timer = setTimeout(() => {
      options.signal.removeEventListener('abort', onAbort);
      reject(new SetupFailed(stage === 'dns' ? 'dns_temporary' : 'connect_timeout', stage, 'timeout'));
    }, options.connectTimeoutMs);
    options.signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        clearTimeout(timer);
        options.signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        options.signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error('lookup failed'));
      },
    );
  });
}

function checkCancelled(signal: AbortSignal, stage: SetupStage, socket?: Socket): void {
  if (!signal.aborted) return;
  socket?.destroy();
  throw new SetupFailed('cancelled', stage, 'cancelled');
}

function tcpFailure(code: string): SetupFailure {
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET') return 'connect_refused';
  if (code === 'ETIMEDOUT') return 'connect_timeout';
  return 'network_unreachable';
}

/** Only the code of a system/TLS error crosses into the record; messages can carry anything. */
export function errorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Za-z0-9_]{1,64}$/.test(code) ? code : 'unknown';
}
