// The API client: JSON calls with the API key, and streamed turns (SSE
// over fetch, since EventSource cannot POST), with a fallback to plain
// JSON and to polling the turn when the server does not stream.

const KEY = 'ctxflow.apiKey';

export const settings = {
  get apiKey() { return localStorage.getItem(KEY) || ''; },
  set apiKey(v) { v ? localStorage.setItem(KEY, v) : localStorage.removeItem(KEY); },
};

// ApiError carries the API's {"error": {"code", "message"}} and the body.
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

// stats count how turns were followed (for the console and the tests):
// to the end of a stream, resumed after a drop, or polled.
export const stats = { streamed: 0, resumed: 0, polled: 0 };

const enc = encodeURIComponent;
export const sessionPath = (id) => `/v1/sessions/${enc(id)}`;

function headers(extra = {}) {
  const h = { 'Content-Type': 'application/json', ...extra };
  if (settings.apiKey) h.Authorization = `Bearer ${settings.apiKey}`;
  return h;
}

async function send(method, path, body, extra) {
  try {
    return await fetch(path, {
      method, headers: headers(extra),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, 'network', `${method} ${path}: ${e.message} (is the server running?)`);
  }
}

async function decode(res, what) {
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!res.ok) {
    const e = data && data.error;
    throw new ApiError(res.status, (e && e.code) || `http_${res.status}`,
      (e && e.message) || `${what}: ${res.status} ${text.slice(0, 200) || res.statusText}`, data);
  }
  return data;
}

// api sends a JSON request and returns the decoded answer; a non-2xx
// answer throws an ApiError.
export async function api(method, path, body) {
  return decode(await send(method, path, body), `${method} ${path}`);
}

export function newId(prefix) {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return prefix + '-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// sseEvents parses a text/event-stream body into {id, event, data}.
export async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let ev = { data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).replace(/\r$/, '');
      buf = buf.slice(i + 1);
      if (line === '') {
        if (ev.data.length) yield { id: ev.id, event: ev.event || 'message', data: ev.data.join('\n') };
        ev = { data: [] };
      } else if (!line.startsWith(':')) {
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        const v = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
        if (field === 'data') ev.data.push(v);
        else if (field === 'event') ev.event = v;
        else if (field === 'id') ev.id = v;
      }
    }
  }
}

const DONE = ['completed', 'failed', 'rejected', 'cancelled'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// pollTurn waits for a queued turn by polling it (and the session's steps
// query for the live timeline).
async function pollTurn(sessionId, turnId, on) {
  stats.polled++;
  for (let delay = 150; ; delay = Math.min(delay * 1.5, 1000)) {
    const r = await api('GET', `${sessionPath(sessionId)}/turns/${enc(turnId)}`);
    if (r && DONE.includes(r.status)) return r;
    if (r && r.steps) r.steps.forEach((s) => on('step', s));
    await sleep(delay);
  }
}

// streamTurn sends a turn asking for a stream and reports each event to
// on(event, data): accepted, step, token, pause, error. It resolves with
// the final turn result. A dropped stream resumes from the last event id;
// a server that answers JSON is waited for (or polled) instead.
export async function streamTurn(sessionId, body, on) {
  const turnId = body.turnId || (body.turnId = newId('web'));
  let res = await send('POST', `${sessionPath(sessionId)}/turns`, body, { Accept: 'text/event-stream' });
  let lastId = '';
  for (let attempt = 0; ; attempt++) {
    const type = res.headers.get('Content-Type') || '';
    if (!type.startsWith('text/event-stream')) {
      const data = await decode(res, 'turn').catch((e) => {
        if (e.body && e.body.turn) return e.body.turn; // a failed turn's result
        throw e;
      });
      if (data && data.turnId && DONE.includes(data.status)) return data;
      on('accepted', data);
      return pollTurn(sessionId, turnId, on);
    }
    let final = null;
    let failure = null;
    try {
      for await (const ev of sseEvents(res.body)) {
        if (ev.id) lastId = ev.id;
        let data = null;
        try { data = JSON.parse(ev.data); } catch { continue; }
        if (ev.event === 'final' || ev.event === 'cancelled') final = data; // a cancelled turn's stream ends with it
        else if (ev.event === 'error') failure = data && data.error;
        on(ev.event, data);
      }
    } catch { /* dropped: resume below */ }
    if (final) { stats.streamed++; return final; }
    if (failure) { // no result to show: the turn's own, if it has one, else the error
      const r = await api('GET', `${sessionPath(sessionId)}/turns/${enc(turnId)}`).catch(() => null);
      if (r && DONE.includes(r.status)) return r;
      throw new ApiError(0, failure.code || 'error', failure.message || 'the turn failed');
    }
    if (attempt >= 3) return pollTurn(sessionId, turnId, on);
    // Resume after the last event we saw (the server replays the rest).
    stats.resumed++;
    res = await send('GET', `${sessionPath(sessionId)}/turns/${enc(turnId)}/events`, undefined,
      lastId ? { Accept: 'text/event-stream', 'Last-Event-ID': lastId } : { Accept: 'text/event-stream' });
    if (!res.ok) return pollTurn(sessionId, turnId, on);
  }
}

// httpURL is s when it is an http(s) URL, else ''.
export function httpURL(s) {
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : '';
  } catch {
    return '';
  }
}
