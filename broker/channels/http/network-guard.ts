import { BlockList, isIP } from 'node:net';

/**
 * Which addresses a route may reach (SSRF guard). Link-local and cloud-metadata addresses are never
 * reachable; private and loopback ranges only when the route's base_url itself names an address in
 * that range (or `localhost`), so an agent cannot turn a public route into a probe of the LAN and a
 * DNS answer cannot move a public host name onto it.
 */
export type AddressClass = 'metadata' | 'link_local' | 'unspecified' | 'multicast' | 'loopback' | 'private' | 'public';

export const metadataHostNames: ReadonlySet<string> = new Set([
  'metadata.google.internal',
  'metadata.goog',
  'metadata',
]);

const metadata = new BlockList();
metadata.addAddress('169.254.169.254', 'ipv4');
metadata.addAddress('169.254.170.2', 'ipv4');
metadata.addAddress('100.100.100.200', 'ipv4');
metadata.addAddress('fd00:ec2::254', 'ipv6');
const linkLocal = new BlockList();
linkLocal.addSubnet('169.254.0.0', 16, 'ipv4');
linkLocal.addSubnet('fe80::', 10, 'ipv6');
const unspecified = new BlockList();
unspecified.addSubnet('0.0.0.0', 8, 'ipv4');
unspecified.addAddress('::', 'ipv6');
const multicast = new BlockList();
multicast.addSubnet('224.0.0.0', 4, 'ipv4');
multicast.addSubnet('240.0.0.0', 4, 'ipv4');
multicast.addSubnet('ff00::', 8, 'ipv6');
const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');
const privateRanges = new BlockList();
privateRanges.addSubnet('10.0.0.0', 8, 'ipv4');
privateRanges.addSubnet('172.16.0.0', 12, 'ipv4');
privateRanges.addSubnet('192.168.0.0', 16, 'ipv4');
privateRanges.addSubnet('100.64.0.0', 10, 'ipv4');
privateRanges.addSubnet('fc00::', 7, 'ipv6');

export function classifyAddress(address: string): AddressClass {
  const { ip, family } = unmapped(address);
  if (metadata.check(ip, family)) return 'metadata';
  if (linkLocal.check(ip, family)) return 'link_local';
  if (unspecified.check(ip, family)) return 'unspecified';
  if (multicast.check(ip, family)) return 'multicast';
  if (loopback.check(ip, family)) return 'loopback';
  if (privateRanges.check(ip, family)) return 'private';
  return 'public';
}

/** The non-public classes a base_url host names (its own class when it is a literal, loopback for localhost). */
export function allowedClassesFor(baseHostname: string): ReadonlySet<AddressClass> {
  const allowed = new Set<AddressClass>(['public']);
  if (baseHostname === 'localhost') allowed.add('loopback');
  else if (isIP(baseHostname) !== 0) {
    const cls = classifyAddress(baseHostname);
    if (cls === 'loopback' || cls === 'private') allowed.add(cls);
  }
  return allowed;
}

/** Why `address` may not be reached by a route with these allowed classes, or undefined if it may. */
export function addressRefusal(address: string, allowed: ReadonlySet<AddressClass>): AddressClass | undefined {
  const cls = classifyAddress(address);
  return allowed.has(cls) ? undefined : cls;
}

/** IPv4-mapped IPv6 (::ffff:10.0.0.1) is checked as the IPv4 address it reaches. */
function unmapped(address: string): { ip: string; family: 'ipv4' | 'ipv6' } {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped !== null) return { ip: mapped[1] as string, family: 'ipv4' };
  return { ip: address, family: isIP(address) === 6 ? 'ipv6' : 'ipv4' };
}
