/**
 * The node option every Postern process is started with (bin/postern.mjs's shebang, the MCP hookup lines, `npm start`,
 * the desktop app's Electron): it parks the inspector that `kill -USR1` would open on an address no local process can
 * reach. 192.0.2.1 is TEST-NET-1 (RFC 5737), never a local address, and a process of the user cannot add it to an
 * interface of the broker's network namespace (that needs CAP_NET_ADMIN there; in a namespace of its own it could, but
 * then it is not where the broker listens): a SIGUSR1 then only makes node print "Starting inspector on 192.0.2.1:9229
 * failed: address not available". This closes the door from node's first instruction, before any Postern code runs to
 * install its own SIGUSR1 listener (broker/host/inspector-guard.ts) — code an attacker injected in that window could
 * blind every later check (Node 20 has no `--disable-sigusr1`; it came in 22.14).
 */
export const inspectorPortParked = '--inspect-port=192.0.2.1:9229';
