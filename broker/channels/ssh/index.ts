export {
  SshChannel,
  type SshChannelOptions,
  type SshChannelReport,
  type SshWireRequest,
  type SshAttemptReport,
  type SshOutput,
  type OutputMark,
  outputMarksMax,
  type SshSetupStage,
  type HostKeyPolicy,
} from './ssh-channel.js';
export { defaultSshLimits, type SshLimits } from './ssh-limits.js';
export { hostKeyFingerprint } from './host-key-fingerprint.js';
export {
  KnownHostsStore,
  KnownHostsUntrusted,
  knownHostsFileName,
  type KnownHostsRefusal,
  type KnownHostsVault,
} from './known-hosts-store.js';
