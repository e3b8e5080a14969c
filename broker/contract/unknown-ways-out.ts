/**
 * What a person can do about an action whose recorded outcome is unknown when nothing will ask the remote for it
 * (an SSH command: no protocol key to resend under, no lookup to ask; an HTTP route with neither): the exact command
 * lines, so a refusal or a card names the way out instead of a dead end. Attesting settles it with the person's
 * written basis (never not_attempted); abandoning releases its lane and leaves it unknown (only a ticket not yet
 * abandoned). Pure wording, shared by the broker's refusals and the CLI's lines.
 */
export function unknownWaysOut(action: {
  readonly action_id: string;
  readonly ticket: number | null;
  readonly abandoned: boolean;
}): string {
  const attest =
    `a person who checked the remote settles it: postern actions attest ${action.action_id} ` +
    `--outcome committed|rejected --effect succeeded|failed|partial_effect|rejected|no_effect --basis '<how you know>'`;
  if (action.ticket === null || action.abandoned) return attest;
  return `${attest}; or releases its lane, its outcome left unknown: postern approvals abandon ${action.ticket} --reason '<why>'`;
}
