/**
 * The ledger: the latest signed checkpoint (GET /ledger/checkpoints/latest), its signers as the note states them
 * (not verified here), and an inclusion check of one event computed in the browser: GET /ledger/events?from=<p>&limit=1
 * and GET /ledger/proofs/inclusion/<p>, then RFC 9162 with SHA-256(0x00 || envelope bytes) as the leaf.
 */
(function () {
  'use strict';
  const A = window.Assay;
  const W = window.AssayWeb;
  const el = A.el;
  const isObj = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
  const muted = (text) => el('span', { class: 'muted', text });
  const mono = (text) => el('span', { class: 'mono', text });

  const subtle = window.crypto && window.crypto.subtle && typeof window.crypto.subtle.digest === 'function' ? window.crypto.subtle : null;
  const sha256 = subtle ? async (bytes) => new Uint8Array(await subtle.digest('SHA-256', bytes)) : W.sha256Js;
  const HASHER = subtle ? 'SHA-256 by Web Crypto' : 'SHA-256 in plain JavaScript (no secure context here, so no Web Crypto)';

  /** The checkpoint the page shows: { treeSize, rootHash } for comparison with a proof's. */
  let shown = null;

  function signatureTable(signatures) {
    const rows = signatures.map((s) =>
      el(
        'tr',
        {},
        el('td', {}, mono(s.name)),
        el('td', { text: s.role === 'log' ? 'log' : 'cosigner (witness)' }),
        el('td', {
          text:
            s.kind === 'ed25519'
              ? 'Ed25519 note signature'
              : s.kind === 'cosignature'
                ? 'tlog-cosignature v1' + (typeof s.timestamp === 'number' ? `, time ${new Date(s.timestamp * 1000).toISOString()}` : '')
                : `unknown type (${s.bytes.length} signature bytes)`,
        }),
        el('td', {}, mono(s.keyIdHex)),
      ),
    );
    return el(
      'table',
      { class: 'data' },
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          ['signer', 'role', 'kind', 'key id'].map((h) => el('th', { scope: 'col', text: h })),
        ),
      ),
      el('tbody', {}, rows),
    );
  }

  async function loadCheckpoint() {
    const host = A.$('checkpoint');
    shown = null;
    let cp;
    try {
      cp = await A.getJson('/ledger/checkpoints/latest');
    } catch (e) {
      A.clear(host).appendChild(el('p', { class: 'muted', text: e && e.status === 404 ? 'No signed checkpoint yet.' : 'Could not load the checkpoint.' }));
      if (!(e && e.status === 404)) throw e;
      return;
    }
    A.clear(host);
    if (!isObj(cp)) throw new A.ApiError(0, 'UI_BAD_CHECKPOINT', 'the checkpoint answer is not a JSON object');
    let note = null;
    let noteError = null;
    try {
      note = W.parseCheckpointNote(cp.note);
    } catch (e) {
      noteError = e.message;
    }
    const root = typeof cp.rootHash === 'string' ? cp.rootHash : null;
    const rootBytes = root ? W.base64Decode(root) : null;
    shown = { treeSize: cp.treeSize, rootHash: root };
    host.appendChild(
      A.kv([
        ['tree size', typeof cp.treeSize === 'number' ? String(cp.treeSize) : null],
        ['root hash', root ? el('span', {}, mono(root), rootBytes ? el('br') : null, rootBytes ? muted(`hex ${W.toHex(rootBytes)}`) : null) : null],
        ['origin', note ? mono(note.origin) : null],
        ['checkpoint seq (issue order, from 0)', typeof cp.seq === 'number' ? String(cp.seq) : null],
      ]),
    );
    if (noteError) {
      A.showError({ code: 'UI_BAD_NOTE', message: `the checkpoint note does not parse: ${noteError}` });
    } else if (note) {
      if (note.treeSize !== cp.treeSize || note.rootHashBase64 !== root)
        A.showError({
          code: 'UI_CHECKPOINT_MISMATCH',
          message: `the note states tree size ${note.treeSize} and root ${note.rootHashBase64}, not the answer's`,
        });
      const cosigners = note.signatures.filter((s) => s.role !== 'log');
      host.appendChild(
        el(
          'p',
          {},
          `${note.signatures.length} signature line${note.signatures.length === 1 ? '' : 's'}: signed by `,
          mono(note.signatures[0].name),
          cosigners.length ? `, cosigned by ${cosigners.length} other signer${cosigners.length === 1 ? '' : 's'}` : ', no cosignature',
          '.',
        ),
      );
      host.appendChild(el('div', { class: 'table-wrap' }, signatureTable(note.signatures)));
    }
    if (typeof cp.note === 'string')
      host.appendChild(el('details', {}, el('summary', { text: 'the signed note' }), el('pre', { class: 'note', text: cp.note })));
    const input = A.$('position');
    if (typeof cp.treeSize === 'number' && cp.treeSize > 0) {
      input.setAttribute('max', String(cp.treeSize - 1));
      if (input.value === '') input.value = String(cp.treeSize - 1);
    }
  }

  function stepList(steps) {
    return el(
      'ul',
      { class: 'steps' },
      steps.map((s) =>
        el(
          'li',
          { class: s.ok === true ? 'ok' : s.ok === false ? (s.required ? 'fail' : 'warn') : 'skip' },
          el('span', { class: 'mark', text: s.ok === true ? '✓' : s.ok === false ? (s.required ? '✗' : '!') : '–' }),
          ' ',
          el('strong', { text: s.name }),
          ': ',
          s.detail,
          s.required ? '' : muted(' (for information)'),
        ),
      ),
    );
  }

  function verdict(yes, text) {
    return el(
      'p',
      { class: 'verdict-box ' + (yes === true ? 'yes' : yes === false ? 'no' : 'unknown') },
      el('strong', { text: `included: ${yes === true ? 'yes' : yes === false ? 'no' : 'unknown'}` }),
      ' — ',
      text,
    );
  }

  async function check(position) {
    const host = A.clear(A.$('inclusion'));
    host.appendChild(muted('checking…'));
    const [events, proof] = await Promise.allSettled([
      A.getJson(`/ledger/events?from=${encodeURIComponent(String(position))}&limit=1`),
      A.getText(`/ledger/proofs/inclusion/${encodeURIComponent(String(position))}`),
    ]);
    A.clear(host);
    const failed = [events, proof].filter((r) => r.status === 'rejected');
    if (failed.length) {
      const e = failed[0].reason;
      host.appendChild(verdict(null, `could not check: ${e && e.code ? e.code + ': ' : ''}${e && e.message ? e.message : e}`));
      return;
    }
    const list = isObj(events.value) && Array.isArray(events.value.events) ? events.value.events : [];
    const event = list.find((e) => isObj(e) && e.position === position) || list[0] || null;
    if (!event) {
      host.appendChild(verdict(false, `the API returned no event at position ${position}`));
      return;
    }
    const r = await W.checkInclusion({ position, event, proofText: proof.value, sha256, shown });
    host.appendChild(verdict(r.included, r.reason));
    host.appendChild(stepList(r.steps));
    host.appendChild(el('h3', { text: 'The event' }));
    host.appendChild(
      A.kv([
        ['position', String(event.position)],
        ['stream', typeof event.stream === 'string' ? mono(event.stream) : null],
        ['revision', event.revision === undefined ? null : String(event.revision)],
        ['type', typeof event.type === 'string' ? event.type : null],
        ['id', typeof event.id === 'string' ? mono(event.id) : null],
        ['time', typeof event.time === 'string' ? event.time : null],
        ['signer', typeof event.signer === 'string' ? mono(event.signer) : null],
        ['prev (hash of the previous envelope of the stream)', typeof event.prev === 'string' ? mono(event.prev) : null],
        ['envelope hash (SHA-256 of the bytes)', r.envelopeHash ? mono(r.envelopeHash) : null],
        ['leaf hash (SHA-256 of 0x00 and the bytes)', r.leafHash ? mono(r.leafHash) : null],
        ['data', isObj(event.data) || Array.isArray(event.data) ? A.renderValue(event.data) : null],
      ]),
    );
    if (r.proof) {
      const cp = r.proof.checkpoint;
      host.appendChild(el('h3', { text: 'The proof' }));
      host.appendChild(
        A.kv([
          ['index', String(r.proof.index)],
          [
            'hashes (leaf side first)',
            r.proof.proof.length
              ? el(
                  'ol',
                  { class: 'mono hashes' },
                  r.proof.proof.map((h) => el('li', { text: W.base64Encode(h) })),
                )
              : muted('none (a tree of one leaf)'),
          ],
          ['against the checkpoint', el('span', {}, `tree size ${cp.treeSize}, root `, mono(cp.rootHashBase64), ', origin ', mono(cp.origin))],
          ['its signers (not verified)', cp.signatures.map((s, i) => [i ? ', ' : '', mono(s.name), s.role === 'log' ? '' : ' (cosigner)'])],
        ]),
      );
    }
    host.appendChild(
      el(
        'p',
        { class: 'notice' },
        'Not checked here: the checkpoint’s signatures, the event’s own signature and its signer’s key and role, and that this checkpoint is consistent with earlier ones. Verify those offline with ',
        el('code', { text: 'assay verify' }),
        ' / ',
        el('code', { text: 'assay ledger verify' }),
        '.',
      ),
    );
  }

  A.$('inclusion-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = A.$('position').value.trim();
    if (!/^(0|[1-9]\d{0,15})$/.test(v) || !Number.isSafeInteger(Number(v))) {
      A.showError({ code: 'UI_BAD_POSITION', message: 'a position is a whole number from 0' });
      return;
    }
    check(Number(v)).catch((e) => A.showError(e, 'inclusion check'));
  });

  A.$('hasher').textContent = HASHER;
  A.page(loadCheckpoint);
})();
