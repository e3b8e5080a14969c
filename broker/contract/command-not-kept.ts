/**
 * What an SSH card rebuilt from the journal (a blocked head after its executor returned, or after a restart) says in
 * place of its command: the journal never holds a command (like a body it may hold anything: docs/queue.md), only its
 * digest, the request fingerprint the approval bound. Every surface — `postern approvals list`, the desktop and web
 * card, main's decision dialog — says it in these words, never a blank "$ ". `accepted` is the acceptance time as the
 * surface writes times (ISO in the CLI; local 24-hour with its zone, time-words.ts dateTime, on the card and in main's
 * dialog). Pure wording.
 */
export function commandNotKeptText(card: {
  readonly request_fingerprint: string;
  readonly action_id: string;
  readonly accepted: string;
}): string {
  return `command not kept: the journal holds only its digest ${card.request_fingerprint}; action ${card.action_id}, accepted ${card.accepted}`;
}
