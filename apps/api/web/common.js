/**
 * What every page of Assay's web UI shares (browser global `Assay`): API requests with the optional bearer token,
 * the error box, the token form, DOM building that only ever inserts text, sortable tables, a generic renderer for
 * JSON documents, and the Server-Sent Events client of the live run page.
 *
 * Every string that comes from the API is hostile: it reaches the page through textContent and setAttribute only,
 * never as HTML, and URLs are built with encodeURIComponent.
 */
(function () {
  'use strict';

  const W = window.AssayWeb;
  const TOKEN_KEY = 'assay-token';
  const TOKEN_RE = /^[\x21-\x7e]{1,4096}$/;
  const MAX_SSE_BUFFER = 16 * 1024 * 1024;

  // ---- DOM -------------------------------------------------------------------------------------------------------

  /**
   * An element: `attrs` are set with setAttribute (`class` as className, `text` as textContent, `on<event>` as a
   * listener); children are nodes or text (strings and numbers become text nodes; null and false are skipped).
   */
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = String(v);
      else if (k === 'text') e.textContent = String(v);
      else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    }
    append(e, children);
    return e;
  }

  function append(parent, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      parent.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return parent;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  const $ = (id) => document.getElementById(id);

  /** A page-relative link to another page with one query parameter. */
  const pageLink = (page, key, value) => `${page}?${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`;

  /** A shortened id (content id, digest) with the full value in its title. */
  function cidSpan(value, head, tail) {
    if (value === null || value === undefined) return el('span', { class: 'muted', text: '—' });
    return el('span', { class: 'mono', title: String(value), text: W.shortCid(value, head, tail) });
  }

  /** A number with up to 6 significant digits, the exact value in its title. */
  function numSpan(value) {
    if (typeof value !== 'number' || !Number.isFinite(value)) return el('span', { class: 'muted', text: '—' });
    return el('span', { class: 'num', title: String(value), text: W.formatNumber(value) });
  }

  function statusSpan(status) {
    return el('span', { class: 'status ' + W.statusClass(status), text: status === null || status === undefined ? '—' : String(status) });
  }

  // ---- the token -------------------------------------------------------------------------------------------------

  function token() {
    try {
      const t = window.sessionStorage.getItem(TOKEN_KEY);
      return t && TOKEN_RE.test(t) ? t : null;
    } catch (_e) {
      return null;
    }
  }

  function setToken(t) {
    try {
      if (t) window.sessionStorage.setItem(TOKEN_KEY, t);
      else window.sessionStorage.removeItem(TOKEN_KEY);
    } catch (_e) {
      // storage refused (private mode): the token simply is not kept
    }
    document.dispatchEvent(new CustomEvent('assay:token'));
  }

  /** The token form in the header: a password field, Set and Clear; the token goes to sessionStorage only. */
  function tokenForm() {
    const host = $('token-form');
    if (!host) return;
    const input = el('input', { type: 'password', autocomplete: 'off', spellcheck: 'false', placeholder: 'API token', 'aria-label': 'API token' });
    const state = el('span', { class: 'token-state' });
    const refresh = () => {
      state.textContent = token() ? 'token set (this tab only)' : 'no token';
    };
    const form = el(
      'form',
      {
        class: 'token',
        onsubmit: (ev) => {
          ev.preventDefault();
          const v = input.value.trim();
          if (!TOKEN_RE.test(v)) {
            showError({ code: 'UI_BAD_TOKEN', message: 'a token is 1 to 4096 printable ASCII characters without spaces' });
            return;
          }
          input.value = '';
          setToken(v);
          refresh();
        },
      },
      input,
      el('button', { type: 'submit', text: 'Set token' }),
      el('button', {
        type: 'button',
        text: 'Clear',
        onclick: () => {
          input.value = '';
          setToken(null);
          refresh();
        },
      }),
      state,
    );
    clear(host).appendChild(form);
    refresh();
  }

  // ---- errors ----------------------------------------------------------------------------------------------------

  function errorBox() {
    let box = $('errors');
    if (!box) {
      box = el('div', { id: 'errors', class: 'errors', role: 'alert', 'aria-live': 'polite' });
      (document.querySelector('main') || document.body).prepend(box);
    }
    return box;
  }

  /** Shows an error (an ApiError, an Error, or { code, message }) in the page's error box, with a close button. */
  function showError(err, context) {
    const box = errorBox();
    const code = err && typeof err.code === 'string' ? err.code : err && err.name ? err.name : 'ERROR';
    const message = err && err.message !== undefined ? String(err.message) : String(err);
    const item = el(
      'div',
      { class: 'error' },
      el('strong', { text: code }),
      context ? ` (${context})` : null,
      ': ',
      message,
      err && err.requestId ? el('span', { class: 'muted', text: ` request ${err.requestId}` }) : null,
      ' ',
    );
    item.appendChild(el('button', { type: 'button', class: 'close', 'aria-label': 'dismiss', text: '×', onclick: () => item.remove() }));
    box.appendChild(item);
  }

  function clearErrors() {
    clear(errorBox());
  }

  // ---- API requests ----------------------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message, requestId) {
      super(message);
      this.name = 'ApiError';
      this.status = status;
      this.code = code;
      this.requestId = requestId || null;
    }
  }

  const API_BASE = W.apiBase(window.location.pathname);
  /** The URL of an API path (`/runs/...`), under the prefix the UI is served at. */
  const apiUrl = (path) => API_BASE + path;

  async function errorOf(res) {
    let text = '';
    try {
      text = await res.text();
    } catch (_e) {
      text = '';
    }
    try {
      const body = JSON.parse(text);
      const e = body && typeof body === 'object' ? body.error : null;
      if (e && typeof e === 'object')
        return new ApiError(
          res.status,
          typeof e.code === 'string' ? e.code : `HTTP_${res.status}`,
          typeof e.message === 'string' ? e.message : `HTTP ${res.status}`,
          typeof e.requestId === 'string' ? e.requestId : null,
        );
    } catch (_e) {
      // not JSON: fall through
    }
    return new ApiError(res.status, `HTTP_${res.status}`, `HTTP ${res.status} ${res.statusText || ''}`.trim() + (text ? `: ${text.slice(0, 300)}` : ''));
  }

  /** fetch() an API path with `Authorization: Bearer <token>` when a token is set; non-2xx throws an ApiError. */
  async function request(path, opts) {
    const o = opts || {};
    const headers = { Accept: o.accept || 'application/json' };
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    let res;
    try {
      res = await fetch(apiUrl(path), { headers, signal: o.signal, cache: 'no-store', credentials: 'same-origin', redirect: 'error' });
    } catch (e) {
      if (e && e.name === 'AbortError') throw e;
      throw new ApiError(0, 'NETWORK', `could not reach the API: ${e && e.message ? e.message : e}`);
    }
    if (!res.ok) throw await errorOf(res);
    return res;
  }

  async function getJson(path, opts) {
    const res = await request(path, opts);
    try {
      return await res.json();
    } catch (_e) {
      throw new ApiError(res.status, 'UI_BAD_JSON', `${path} did not answer with JSON`);
    }
  }

  async function getText(path, opts) {
    const res = await request(path, { accept: 'text/plain', ...(opts || {}) });
    return res.text();
  }

  // ---- Server-Sent Events over fetch -----------------------------------------------------------------------------

  const sleep = (ms, signal) =>
    new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      if (signal) signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
    });

  /**
   * Follows an SSE endpoint with fetch() (so the Authorization header can be sent) and a stream reader; each event
   * goes to `onEvent`, which returns false to stop. A dropped or failed connection is retried with exponential
   * backoff (1 s doubling to 30 s, reset by an event). `onState(state, detail)` hears `connecting`, `connected`,
   * `retry` (detail: ms), `stopped`, and `unavailable` (detail: the ApiError of a 4xx answer, which is not retried).
   * Returns { stop }.
   */
  function follow(path, handlers) {
    const onEvent = handlers.onEvent;
    const onState = handlers.onState || (() => {});
    const stopper = new AbortController();
    let attempt = 0;
    let current = null;

    async function once() {
      current = new AbortController();
      const abort = () => current.abort();
      stopper.signal.addEventListener('abort', abort, { once: true });
      try {
        const res = await request(path, { accept: 'text/event-stream', signal: current.signal });
        if (!res.body || !res.body.getReader) throw new ApiError(res.status, 'UI_NO_STREAM', 'this browser cannot read a streamed response');
        onState('connected');
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return false;
          buf += decoder.decode(value, { stream: true });
          if (buf.length > MAX_SSE_BUFFER) throw new ApiError(0, 'UI_SSE_TOO_LARGE', 'an event larger than 16 MiB: reconnecting');
          const { events, rest } = W.parseSse(buf);
          buf = rest;
          for (const ev of events) {
            attempt = 0;
            if (onEvent(ev) === false) {
              current.abort();
              return true;
            }
          }
        }
      } finally {
        stopper.signal.removeEventListener('abort', abort);
      }
    }

    (async () => {
      while (!stopper.signal.aborted) {
        onState('connecting');
        try {
          if (await once()) break;
        } catch (e) {
          if (stopper.signal.aborted) break;
          if (e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 408 && e.status !== 429) {
            onState('unavailable', e);
            return;
          }
        }
        if (stopper.signal.aborted) break;
        const d = W.backoffMs(attempt++, { rand: Math.random });
        onState('retry', d);
        await sleep(d, stopper.signal);
      }
      onState('stopped');
    })();

    return { stop: () => stopper.abort() };
  }

  // ---- tables ----------------------------------------------------------------------------------------------------

  /**
   * A table whose columns sort on a click of their header (again: the other way; a third time: the original
   * order). `columns`: [{ label, value: row → sortable value, render: row → node or text, className, title,
   * firstDir }]. `opts`: caption, empty (text of an empty table), rowClass (row → class), state (an object that
   * keeps the sort between rebuilds).
   */
  function sortableTable(columns, rows, opts) {
    const o = opts || {};
    const table = el('table', { class: 'data sortable' + (o.className ? ' ' + o.className : '') });
    if (o.caption) table.appendChild(el('caption', { text: o.caption }));
    const tbody = el('tbody');
    // the sort survives a rebuild of the table (live updates) when the caller keeps `state`
    const state = o.state || {};
    let sortedBy = Number.isInteger(state.sortedBy) && state.sortedBy < columns.length ? state.sortedBy : null;
    let dir = state.dir === 'desc' ? 'desc' : 'asc';
    const headRow = el('tr');
    const ths = columns.map((c, i) =>
      el(
        'th',
        { scope: 'col', class: c.className || null, title: c.title || null, 'aria-sort': 'none' },
        el('button', { type: 'button', class: 'sort', text: c.label, onclick: () => sortBy(i) }),
      ),
    );
    append(headRow, ths);
    table.appendChild(el('thead', {}, headRow));
    table.appendChild(tbody);

    function fill(list) {
      clear(tbody);
      if (list.length === 0) {
        tbody.appendChild(el('tr', {}, el('td', { colspan: String(columns.length), class: 'muted', text: o.empty || 'none' })));
        return;
      }
      for (const row of list) {
        const tr = el('tr', { class: o.rowClass ? o.rowClass(row) : null });
        for (const c of columns) {
          let content;
          try {
            content = c.render(row);
          } catch (_e) {
            content = el('span', { class: 'muted', text: '?' });
          }
          tr.appendChild(el('td', { class: c.className || null }, content));
        }
        tbody.appendChild(tr);
      }
    }

    function sortBy(i) {
      if (sortedBy === i && dir === 'desc') {
        sortedBy = null;
        dir = 'asc';
      } else if (sortedBy === i) dir = 'desc';
      else {
        sortedBy = i;
        dir = columns[i].firstDir || 'asc';
      }
      show();
    }

    function show() {
      state.sortedBy = sortedBy;
      state.dir = dir;
      ths.forEach((th, k) => th.setAttribute('aria-sort', k === sortedBy ? (dir === 'asc' ? 'ascending' : 'descending') : 'none'));
      fill(sortedBy === null ? rows : W.sortRows(rows, columns[sortedBy].value, dir));
    }

    show();
    return table;
  }

  // ---- generic JSON rendering ------------------------------------------------------------------------------------

  const MAX_DEPTH = 10;
  const MAX_ITEMS = 500;

  /**
   * Any JSON value as nodes: null as `—`, scalars as text, arrays of objects as tables (the union of their keys),
   * other arrays as lists, objects as definition lists; deeper than 10 levels as JSON text; at most 500 items each.
   */
  function renderValue(value, depth) {
    const d = depth || 0;
    if (value === null || value === undefined) return el('span', { class: 'muted', text: '—' });
    if (typeof value === 'number') return numSpan(value);
    if (typeof value === 'boolean') return el('span', { class: value ? 'yes' : 'no', text: value ? 'yes' : 'no' });
    if (typeof value === 'string') return el('span', { text: value });
    if (d >= MAX_DEPTH) return el('code', { text: JSON.stringify(value).slice(0, 2000) });
    if (Array.isArray(value)) {
      if (value.length === 0) return el('span', { class: 'muted', text: '(none)' });
      const shown = value.slice(0, MAX_ITEMS);
      const more = value.length > MAX_ITEMS ? el('p', { class: 'muted', text: `… and ${value.length - MAX_ITEMS} more` }) : null;
      const cols = W.tableColumns(shown, 64);
      if (cols) {
        const table = el('table', { class: 'data generic' });
        table.appendChild(
          el(
            'thead',
            {},
            el(
              'tr',
              {},
              cols.map((c) => el('th', { scope: 'col', text: c })),
            ),
          ),
        );
        const tbody = el('tbody');
        for (const item of shown)
          tbody.appendChild(
            el(
              'tr',
              {},
              cols.map((c) => el('td', {}, Object.prototype.hasOwnProperty.call(item, c) ? renderValue(item[c], d + 1) : '')),
            ),
          );
        table.appendChild(tbody);
        return el('div', { class: 'table-wrap' }, table, more);
      }
      return el(
        'div',
        {},
        el(
          'ul',
          { class: 'plain' },
          shown.map((v) => el('li', {}, renderValue(v, d + 1))),
        ),
        more,
      );
    }
    if (typeof value === 'object') {
      const keys = Object.keys(value);
      if (keys.length === 0) return el('span', { class: 'muted', text: '(empty)' });
      const dl = el('dl', { class: 'kv' });
      for (const k of keys.slice(0, MAX_ITEMS)) {
        dl.appendChild(el('dt', { text: k }));
        dl.appendChild(el('dd', {}, renderValue(value[k], d + 1)));
      }
      return dl;
    }
    return el('span', { text: String(value) });
  }

  /** A definition list of [label, node-or-text] pairs. */
  function kv(pairs) {
    const dl = el('dl', { class: 'kv' });
    for (const [k, v] of pairs) {
      dl.appendChild(el('dt', { text: k }));
      dl.appendChild(el('dd', {}, v === null || v === undefined ? el('span', { class: 'muted', text: '—' }) : v));
    }
    return dl;
  }

  // ---- pages -----------------------------------------------------------------------------------------------------

  /** Runs `load` once the page is ready, and again whenever the token is set or cleared. */
  function page(load) {
    const run = () => {
      clearErrors();
      Promise.resolve()
        .then(load)
        .catch((e) => showError(e));
    };
    const start = () => {
      tokenForm();
      document.addEventListener('assay:token', run);
      run();
    };
    if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start, { once: true });
    else start();
  }

  const query = (name) => new URLSearchParams(window.location.search).get(name);

  window.Assay = {
    el,
    append,
    clear,
    $,
    pageLink,
    cidSpan,
    numSpan,
    statusSpan,
    token,
    setToken,
    showError,
    clearErrors,
    ApiError,
    apiUrl,
    request,
    getJson,
    getText,
    follow,
    sortableTable,
    renderValue,
    kv,
    page,
    query,
  };
})();
