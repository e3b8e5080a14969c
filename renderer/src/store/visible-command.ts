// The marking lives in the contract so main's native decision dialog marks a command exactly as the card does.
export {
  commandSize,
  spaceRunShownMax,
  visibleCommand,
  type CommandPiece,
} from '../../../broker/contract/visible-command.js';
