// The JSON API client. The API key lives only in the `apiKey` variable of this module: it is
// never written to a URL, localStorage, sessionStorage or a cookie, so closing or reloading the
// tab forgets it.

let apiKey = null;
let unauthorizedHandler = () => {};

export function setKey(key) { apiKey = key || null; }
export function hasKey() { return apiKey !== null; }
export function forgetKey() { apiKey = null; }

/** Called with the error whenever the server answers 401, so the app can ask for a key again. */
export function onUnauthorized(handler) { unauthorizedHandler = handler; }

/** An API error with the problem+json fields the server sends. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(describe(status, problem));
    this.status = status;
    this.problem = problem;
  }
}

function describe(status, problem) {
  if (status === 0) return `The server could not be reached (${problem.detail}).`;
  const title = problem.title || `HTTP ${status}`;
  let text = problem.detail ? `${title}: ${problem.detail}` : title;
  // A validation problem lists every field at fault; show them all, not just the first.
  if (Array.isArray(problem.errors) && problem.errors.length > 0) {
    const extra = problem.errors
      .map((e) => (typeof e === 'string' ? e : e.detail || e.message || JSON.stringify(e)))
      .filter((e) => !text.includes(e));
    if (extra.length) text += ` (${extra.join('; ')})`;
  }
  return text;
}

/**
 * Calls the API. `path` starts with /v1/. Answers the parsed JSON body (null for 204).
 * Throws ApiError with the server's problem, or status 0 when the network failed.
 */
export async function api(path, { method = 'GET', body, headers = {} } = {}) {
  const sent = { accept: 'application/json', ...headers };
  if (apiKey) sent.authorization = `Bearer ${apiKey}`;
  if (body !== undefined) sent['content-type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: sent,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (err) {
    throw new ApiError(0, { detail: err.message });
  }
  if (response.status === 204) return null;
  const type = response.headers.get('content-type') || '';
  const text = await response.text();
  let data = null;
  if (type.includes('json') && text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!response.ok) {
    const problem = data && typeof data === 'object'
      ? data
      : { title: response.statusText, detail: text.slice(0, 200) };
    const error = new ApiError(response.status, problem);
    if (response.status === 401) unauthorizedHandler(error);
    throw error;
  }
  return data;
}

/** Builds a query string from the defined, non-empty values of `params`. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const text = q.toString();
  return text ? `?${text}` : '';
}

/**
 * The URL an EventSource opens for a task's events after `after`. With a key it asks for a
 * stream token, since an EventSource cannot send the Authorization header and the key must
 * never appear in a URL; the token is good for this task's events only, for 5 minutes.
 */
export async function streamUrl(taskId, after) {
  const id = encodeURIComponent(taskId);
  if (!apiKey) return `/v1/tasks/${id}/events${query({ after })}`;
  const grant = await api(`/v1/tasks/${id}/stream-token`, { method: 'POST' });
  const url = new URL(grant.url, window.location.origin);
  url.searchParams.set('after', String(after));
  // Same origin only: the token is for this server, whatever the answer says.
  return `${url.pathname}${url.search}`;
}
