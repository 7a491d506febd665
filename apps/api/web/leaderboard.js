/**
 * A task's leaderboard: GET /leaderboards/<task> → { task, groups: LeaderboardGroup[] }, one sortable table per
 * protocol group, with the group's key, its start and oracle baselines, and what sets it apart from the first group.
 */
(function () {
  'use strict';
  const A = window.Assay;
  const W = window.AssayWeb;
  const el = A.el;
  const isObj = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
  const muted = (text) => el('span', { class: 'muted', text });
  const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

  function baseline(b) {
    if (!isObj(b)) return muted('none recorded under this task digest and fingerprint');
    const range = num(b.min) !== null && num(b.max) !== null ? ` [${W.formatNumber(b.min)}, ${W.formatNumber(b.max)}]` : '';
    return el(
      'span',
      {},
      'median ',
      A.numSpan(b.median),
      range,
      `, ${num(b.completed) ?? '?'}/${num(b.repeats) ?? '?'} repeats completed`,
      num(b.spread) !== null ? `, spread ${W.formatNumber(b.spread)}` : '',
      ', snapshot ',
      A.cidSpan(b.snapshot),
      typeof b.recordedAt === 'string' ? `, recorded ${b.recordedAt}` : '',
      num(b.position) !== null ? ` at position ${b.position}` : '',
    );
  }

  function vsBaseline(v) {
    if (!isObj(v)) return muted('—');
    if (v.matched !== true) return el('span', { class: 'muted', title: typeof v.reason === 'string' ? v.reason : '', text: 'no baseline' });
    const b = isObj(v.baseline) ? v.baseline : {};
    const title = [
      typeof v.reason === 'string' ? v.reason : '',
      `start baseline median ${W.formatNumber(b.median)} over ${num(b.completed) ?? '?'} completed repeat(s)`,
    ].join('; ');
    const verdict = typeof v.verdict === 'string' ? v.verdict : '';
    return el(
      'span',
      { title },
      num(v.absolute) === null ? muted('—') : W.formatSigned(v.absolute),
      num(v.relative) === null ? '' : ` (${W.formatPercent(v.relative)})`,
      ' ',
      el('span', { class: 'verdict ' + W.statusClass(verdict), text: verdict.replace(/_/g, ' ') }),
    );
  }

  function rejudge(j) {
    if (!isObj(j)) return muted('—');
    const title = [
      typeof j.status === 'string' ? `status ${j.status}` : '',
      num(j.median) !== null ? `median ${j.median}` : '',
      num(j.delta) !== null ? `delta ${j.delta}` : '',
      num(j.tolerance) !== null ? `tolerance ${j.tolerance}` : '',
      num(j.judges) !== null ? `${j.judges} Judge(s)` : '',
      typeof j.at === 'string' ? `at ${j.at}` : '',
    ]
      .filter(Boolean)
      .join(', ');
    const word = typeof j.verdict === 'string' ? j.verdict : typeof j.status === 'string' ? j.status : '?';
    return el('span', { class: 'verdict ' + (j.matches === true ? 'status-completed' : W.statusClass(word)), title, text: word.replace(/_/g, ' ') });
  }

  function source(r) {
    const s = typeof r.source === 'string' ? r.source : r.source === undefined ? 'ledger' : String(r.source);
    if (s === 'ledger') return el('span', { class: 'muted', text: 'ledger' });
    return el('span', {}, el('span', { class: 'badge badge-imported', text: s }), imported(r));
  }

  /** An imported row's provenance: the publisher key's name (the full key text and the bundle digest in the tooltip). */
  function imported(r) {
    const p = r.imported;
    if (!p || typeof p !== 'object' || typeof p.publisherKey !== 'string') return null;
    const name = p.publisherKey.split('+')[0];
    const title = `publisher key ${p.publisherKey}\nbundle ${String(p.bundleDigest)}\nimported ${String(p.importedAt)}`;
    return el('span', { class: 'muted', title, text: ` from ${name}` });
  }

  function columns(direction) {
    const best = direction === 'minimize' ? 'asc' : 'desc';
    const text = (v) => (v === null || v === undefined ? muted('—') : String(v));
    return [
      { label: 'rank', value: (r) => r.rank, render: (r) => text(r.rank), className: 'n' },
      {
        label: 'run',
        value: (r) => r.run,
        render: (r) => (typeof r.run === 'string' ? el('a', { href: A.pageLink('run.html', 'run', r.run), class: 'mono', text: r.run }) : text(r.run)),
      },
      { label: 'agent', value: (r) => r.agent, render: (r) => text(r.agent) },
      { label: 'model', value: (r) => r.model, render: (r) => text(r.model) },
      { label: 'status', value: (r) => r.status, render: (r) => A.statusSpan(r.status) },
      {
        label: 'best score',
        value: (r) => (isObj(r.best) ? r.best.score : null),
        render: (r) => A.numSpan(isObj(r.best) ? r.best.score : null),
        className: 'n',
        firstDir: best,
      },
      { label: 'round', value: (r) => (isObj(r.best) ? r.best.round : null), render: (r) => text(isObj(r.best) ? r.best.round : null), className: 'n' },
      { label: 'snapshot', value: (r) => (isObj(r.best) ? r.best.snapshot : null), render: (r) => A.cidSpan(isObj(r.best) ? r.best.snapshot : null) },
      {
        label: 'vs start baseline',
        title: "the best score's improvement over the start baseline's median, and whether it lies outside the baseline's range",
        value: (r) => (isObj(r.vsBaseline) ? r.vsBaseline.absolute : null),
        render: (r) => vsBaseline(r.vsBaseline),
        firstDir: 'desc',
      },
      {
        label: 're-judge',
        title: 'the latest re-judge of the best snapshot recorded in this ledger',
        value: (r) => (isObj(r.rejudge) ? r.rejudge.verdict : null),
        render: (r) => rejudge(r.rejudge),
      },
      {
        label: 'submissions',
        title: 'used / allowed',
        value: (r) => (isObj(r.submissions) ? r.submissions.used : null),
        render: (r) => (isObj(r.submissions) ? `${num(r.submissions.used) ?? '?'}/${num(r.submissions.allowed) ?? '∞'}` : muted('—')),
        className: 'n',
      },
      {
        label: 'invalid',
        title: 'submission_error rounds',
        value: (r) => (isObj(r.rounds) ? r.rounds.invalid : null),
        render: (r) => text(isObj(r.rounds) ? r.rounds.invalid : null),
        className: 'n',
      },
      {
        label: 'failed',
        title: 'verifier_error and verifier_timeout rounds',
        value: (r) => (isObj(r.rounds) ? r.rounds.failed : null),
        render: (r) => text(isObj(r.rounds) ? r.rounds.failed : null),
        className: 'n',
      },
      {
        label: 'violating',
        title: 'rule_violation rounds',
        value: (r) => (isObj(r.rounds) ? r.rounds.violating : null),
        render: (r) => text(isObj(r.rounds) ? r.rounds.violating : null),
        className: 'n',
      },
      {
        label: 'refunded',
        title: 'refunded rounds',
        value: (r) => (isObj(r.rounds) ? r.rounds.refunded : null),
        render: (r) => text(isObj(r.rounds) ? r.rounds.refunded : null),
        className: 'n',
      },
      {
        label: 'wall time',
        value: (r) => r.wallTimeMs,
        render: (r) =>
          num(r.wallTimeMs) === null
            ? muted(r.status === 'running' ? 'running' : '—')
            : el('span', { title: `${r.startedAt} → ${r.completedAt}`, text: W.formatMs(r.wallTimeMs) }),
        className: 'n',
      },
      { label: 'source', value: (r) => r.source, render: source },
    ];
  }

  A.page(async () => {
    const task = A.query('task');
    const holder = A.clear(A.$('groups'));
    const status = A.$('status');
    A.$('task').textContent = task === null ? '' : task;
    if (task === null || task === '') {
      status.textContent = '';
      A.showError({ code: 'UI_NO_TASK', message: 'no task given: pick one from the task list' });
      return;
    }
    document.title = `Assay: leaderboard of ${task}`;
    status.textContent = 'loading…';
    let body;
    try {
      body = await A.getJson('/leaderboards/' + encodeURIComponent(task));
    } catch (e) {
      status.textContent = '';
      throw e;
    }
    const groups = isObj(body) && Array.isArray(body.groups) ? body.groups.filter(isObj) : [];
    const runs = groups.reduce((n, g) => n + (Array.isArray(g.rows) ? g.rows.length : 0), 0);
    status.textContent =
      groups.length === 0
        ? 'No runs or baselines of this task.'
        : `${runs} run${runs === 1 ? '' : 's'} in ${groups.length} protocol group${groups.length === 1 ? '' : 's'}` +
          (groups.length > 1 ? ': runs of different groups are not ranked against each other.' : '.');
    const differences = W.groupDifferences(groups);
    groups.forEach((g, i) => {
      const direction = g.direction === 'minimize' ? 'minimize' : 'maximize';
      const mine = differences.filter((d) => d.startsWith(`group ${i + 1} `) || d.startsWith(`group ${i + 1}:`));
      const rows = Array.isArray(g.rows) ? g.rows.filter(isObj) : [];
      const section = el(
        'section',
        { class: 'group' },
        el(
          'h2',
          {},
          `Group ${i + 1}: `,
          el('span', { text: g.metric === null || g.metric === undefined ? 'primary score' : String(g.metric) }),
          ` (${direction})`,
        ),
        A.kv([
          ['task', typeof g.task === 'string' ? g.task : null],
          ['task digest', typeof g.taskDigest === 'string' ? el('span', { class: 'mono', text: g.taskDigest }) : null],
          ['protocol fingerprint', typeof g.fingerprint === 'string' ? el('span', { class: 'mono', text: g.fingerprint }) : null],
          ['metric, direction', `${g.metric === null || g.metric === undefined ? '(the primary score)' : g.metric}, ${direction}`],
          ['start baseline', baseline(isObj(g.baselines) ? g.baselines.start : null)],
          ['oracle baseline', baseline(isObj(g.baselines) ? g.baselines.oracle : null)],
        ]),
        mine.length
          ? el(
              'ul',
              { class: 'differences' },
              mine.map((d) => el('li', { text: d })),
            )
          : null,
        el(
          'div',
          { class: 'table-wrap' },
          A.sortableTable(columns(direction), rows, {
            empty: 'no runs under this protocol (baselines only)',
            rowClass: (r) => (r.source !== undefined && r.source !== 'ledger' ? 'imported' : null),
          }),
        ),
      );
      holder.appendChild(section);
    });
  });
})();
