// Follows a task's Server-Sent Events (GET /v1/tasks/{id}/events). The browser's
// EventSource resumes a dropped stream by itself, sending Last-Event-ID; when it gives
// up (an error status, say 503 while the server restarts), the stream is opened again
// with ?after=<last seq seen>, backing off up to 15 s. Events are handed on once each,
// in order, and the stream is closed after "finished", the last event of every task.

// The types the server writes (docs: Event); EventSource only hands named events to
// listeners of that name.
const TYPES = ['queued', 'running', 'profiled', 'step', 'cancel_requested', 'cancelled',
  'succeeded', 'failed', 'finished'];

// Calls onEvent(event) for each new event and onState(state) with "connecting", "live",
// "reconnecting" or "ended". Returns a function that stops following.
export function followEvents(taskId, onEvent, onState) {
  let last = 0;
  let source = null;
  let timer = null;
  let delay = 1000;
  let stopped = false;

  const stop = (state) => {
    stopped = true;
    clearTimeout(timer);
    if (source) source.close();
    if (state) onState(state);
  };

  const take = (msg) => {
    const seq = Number(msg.lastEventId);
    if (!(seq > last)) return;  // a replay of what was seen already
    last = seq;
    delay = 1000;
    const event = JSON.parse(msg.data);
    onEvent(event);
    if (event.type === 'finished') stop('ended');
  };

  const open = () => {
    if (stopped) return;
    onState(last ? 'reconnecting' : 'connecting');
    source = new EventSource(`/v1/tasks/${taskId}/events${last ? `?after=${last}` : ''}`);
    for (const t of TYPES) source.addEventListener(t, take);
    source.onopen = () => onState('live');
    source.onerror = () => {
      if (stopped) return;
      if (source.readyState === EventSource.CLOSED) {
        source.close();
        onState('reconnecting');
        timer = setTimeout(open, delay);
        delay = Math.min(delay * 2, 15000);
      } else {
        onState('reconnecting');
      }
    };
  };

  open();
  return () => stop(null);
}
