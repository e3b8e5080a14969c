'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- CommonJS on purpose, see below */
// Loads the compiled addon (built by `node-gyp rebuild` when npm installs this package).
// CommonJS on purpose: a .node file is loaded with require in Node and in Electron alike.
const path = require('node:path');

const addon = require(path.join(__dirname, 'build', 'Release', 'peercred.node'));

exports.peerCredentials = addon.peerCredentials;
exports.hardenProcess = addon.hardenProcess;
exports.lockFile = addon.lockFile;
exports.listeningTcpInodes = addon.listeningTcpInodes;
