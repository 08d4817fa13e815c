// The API client: same-origin requests only, the bearer token of this tab for writes,
// and the API's one error shape turned into ApiError.

const TOKEN_KEY = 'opforge.token';

// An error answer: status, and the body's {error: {code, message, field}}.
export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
  document.dispatchEvent(new CustomEvent('opforge-token'));
}

// Set by the app: asks the user for a token, resolving true once one was given.
let askToken = null;
export function onTokenNeeded(fn) {
  askToken = fn;
}

// The ApiError of a failed response.
async function errorOf(resp) {
  let body = null;
  try {
    body = await resp.json();
  } catch {
    // not JSON: the HTTP library's own answers
  }
  const e = body && body.error;
  return e ? new ApiError(resp.status, e.code, e.message, e.field)
           : new ApiError(resp.status, 'http_' + resp.status, resp.statusText || 'request failed', null);
}

// Sends one request to this origin. body (any JSON value) is sent as JSON. Returns the
// parsed JSON, the text of other bodies, or null for 204; {raw: true} returns the
// Response. A write refused for want of a (right) token asks for one and is sent once
// more. Throws ApiError.
export async function api(method, path, body, opts = {}) {
  if (!path.startsWith('/') || path.startsWith('//')) throw new Error('same-origin paths only');
  const write = method !== 'GET' && method !== 'HEAD';
  for (let attempt = 0; ; attempt++) {
    const headers = {Accept: 'application/json'};
    if (write && token()) headers.Authorization = `Bearer ${token()}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const resp = await fetch(path, {
      method, headers, cache: 'no-store', credentials: 'same-origin', redirect: 'error',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (resp.ok) {
      if (opts.raw) return resp;
      if (resp.status === 204) return null;
      const type = resp.headers.get('Content-Type') || '';
      return type.startsWith('application/json') ? resp.json() : resp.text();
    }
    const err = await errorOf(resp);
    const tokenProblem = err.code === 'unauthorized' || err.code === 'forbidden';
    if (write && tokenProblem && attempt === 0 && askToken && await askToken(err.message)) continue;
    throw err;
  }
}

// A query string from an object, leaving out empty values ("" when nothing is left).
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const text = q.toString();
  return text ? `?${text}` : '';
}
