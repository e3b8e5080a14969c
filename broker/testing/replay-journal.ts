import type { JournalEvent, NewEvent } from '../contract/index.js';
import type { Journal } from '../journal/journal.js';
import type { FakeClock } from './fake-clock.js';

/**
 * Appends a recorded log into another journal with each event's original wall time, one event per
 * commit so every event keeps its own at_ms. The target's tickets come from the events, so its
 * current-state tables must equal the source's if the projection is a pure fold of the log.
 */
export async function replayJournal(events: Iterable<JournalEvent>, into: Journal, clock: FakeClock): Promise<number> {
  let count = 0;
  for (const event of events) {
    clock.set(event.at_ms);
    // Session and configuration events share the log (and its seq) but go through their own appends.
    const appended = event.action_id.startsWith('ses_')
      ? await into.appendSession(asNewEvent(event))
      : event.action_id.startsWith('cfg_')
        ? await into.appendConfig(asNewEvent(event))
        : await into.append(asNewEvent(event));
    if (appended.event.seq !== event.seq) {
      throw new Error(
        `replay put seq ${event.seq} at ${appended.event.seq}: the log has a gap or the target was not empty`,
      );
    }
    count += 1;
  }
  return count;
}

function asNewEvent(event: JournalEvent): NewEvent {
  const { seq: _seq, at_ms: _atMs, ...rest } = event;
  return rest as NewEvent;
}
