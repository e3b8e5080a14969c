export {
  startAgentSocket,
  agentSocketPath,
  agentSocketDirName,
  agentSocketFileName,
  type AgentSocket,
  type AgentSocketOptions,
} from './agent-socket.js';
export { agentLimitsDefault, type AgentLimits } from './agent-limits.js';
export {
  argvOf,
  isLauncherArgv,
  isShimArgv,
  processAlive,
  readPeerIdentity,
  describePeer,
  parseProcStat,
  startTimeUnavailable,
} from './peer-identity.js';
export { readPeerCredentials, type PeerCredentials } from './peer-credentials.js';
export { admitPeer, type PeerDecision } from './admit-peer.js';
export { isOperatorName, operatorWordStems } from './operator-names.js';
export { listedTools } from './agent-tools.js';
