// main.ts's first import, with no imports of its own, so the listener is in place before the rest of the app's
// modules load: from here on `kill -USR1` cannot open node's inspector in the process that holds the vault
// (libuv owns the signal once a listener exists; broker/host/inspector-guard.ts says why). A packaged build also
// has Electron's nodeCliInspect fuse off, which ignores the signal too (docs/desktop.md).
process.on('SIGUSR1', () => {});
