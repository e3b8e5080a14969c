import { describe, expect, it } from 'vitest';
import { addressRefusal, allowedClassesFor, classifyAddress } from './network-guard.js';

describe('classifyAddress', () => {
  it.each([
    ['169.254.169.254', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['169.254.1.1', 'link_local'],
    ['fe80::1', 'link_local'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['127.0.0.1', 'loopback'],
    ['127.1.2.3', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', 'public'],
    ['192.168.1.1', 'private'],
    ['fc00::1', 'private'],
    ['fd12::1', 'private'],
    ['8.8.8.8', 'public'],
    ['2606:4700::1111', 'public'],
  ])('%s is %s', (address, cls) => {
    expect(classifyAddress(address)).toBe(cls);
  });
});

describe('what a route may reach', () => {
  it.each([
    ['api.example.com', '93.184.216.34', undefined],
    ['api.example.com', '127.0.0.1', 'loopback'],
    ['api.example.com', '10.0.0.5', 'private'],
    ['api.example.com', '169.254.169.254', 'metadata'],
    ['127.0.0.1', '127.0.0.1', undefined],
    ['localhost', '::1', undefined],
    ['127.0.0.1', '10.0.0.5', 'private'],
    ['10.0.0.5', '10.0.0.5', undefined],
    ['10.0.0.5', '127.0.0.1', 'loopback'],
    ['169.254.169.254', '169.254.169.254', 'metadata'],
    ['fe80::1', 'fe80::1', 'link_local'],
  ])('a route on %s reaching %s is refused as %s', (base, address, refused) => {
    expect(addressRefusal(address, allowedClassesFor(base))).toBe(refused);
  });
});
