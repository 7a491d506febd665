/**
 * A run: GET /runs/<id>/trajectory (chart and rounds table), GET /runs/<id>/report (rendered generically), and
 * live updates from GET /runs/<id>/live, Server-Sent Events read with fetch() so the token can be sent; the chart
 * and the table are redrawn at every `trajectory` event until the run is no longer running.
 */
(function () {
  'use strict';
  const A = window.Assay;
  const W = window.AssayWeb;
  const el = A.el;
  const isObj = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
  const muted = (text) => el('span', { class: 'muted', text });
  const enc = encodeURIComponent;
  const POLL_MS = 5000;
  const MAX_LOG_CHARS = 2 * 1024 * 1024;
  const CHART_HEIGHT = 340;

  let plot = null;
  let live = null;
  let poll = null;
  let generation = 0;
  const tableState = {};

  const setLive = (text) => {
    A.$('live').textContent = text;
  };

  function stopUpdates() {
    if (live) live.stop();
    live = null;
    if (poll) clearInterval(poll);
    poll = null;
  }

  // ---- chart -----------------------------------------------------------------------------------------------------

  /** uPlot points drawn as a shape of our own: `triangle`, `cross` or `square`, on the series' own scale. */
  function marker(shape) {
    return (u, si, i0, i1, filtIdxs) => {
      const xs = u.data[0];
      const ys = u.data[si];
      const scale = u.series[si].scale;
      const r = ((u.series[si].points.size || 10) / 2) * (window.uPlot.pxRatio || 1);
      const stroke = new Path2D();
      const fill = shape === 'cross' ? null : new Path2D();
      const draw = (i) => {
        if (ys[i] === null || ys[i] === undefined) return;
        const cx = u.valToPos(xs[i], 'x', true);
        const cy = u.valToPos(ys[i], scale, true);
        if (shape === 'cross') {
          stroke.moveTo(cx - r, cy - r);
          stroke.lineTo(cx + r, cy + r);
          stroke.moveTo(cx - r, cy + r);
          stroke.lineTo(cx + r, cy - r);
        } else if (shape === 'square') {
          for (const p of [stroke, fill]) p.rect(cx - r * 0.8, cy - r * 0.8, r * 1.6, r * 1.6);
        } else {
          for (const p of [stroke, fill]) {
            p.moveTo(cx, cy - r);
            p.lineTo(cx + r, cy + r * 0.8);
            p.lineTo(cx - r, cy + r * 0.8);
            p.closePath();
          }
        }
      };
      if (filtIdxs) filtIdxs.forEach(draw);
      else for (let i = i0; i <= i1; i++) draw(i);
      return { stroke, fill, clip: null, flags: 0 };
    };
  }

  function chartOptions(t, width) {
    const U = window.uPlot;
    const mark = (label, color, shape) => ({
      label,
      scale: 'mark',
      stroke: color,
      width: 0,
      paths: () => null,
      value: (_u, v) => (v === null || v === undefined ? '—' : 'yes'),
      points: { show: true, size: 11, width: 2, stroke: color, fill: color, space: 0, paths: marker(shape) },
    });
    return {
      width,
      height: CHART_HEIGHT,
      scales: { x: { time: false }, mark: { auto: false, range: () => [-0.04, 1] } },
      axes: [
        { label: 'seconds since the run started' },
        { label: typeof t.metric === 'string' ? `${t.metric} (${t.direction === 'minimize' ? 'lower' : 'higher'} is better)` : 'score' },
      ],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      series: [
        { label: 'elapsed', value: (_u, v) => (v === null || v === undefined ? '—' : W.formatMs(v * 1000)) },
        {
          label: 'score',
          stroke: '#1f6feb',
          width: 0,
          paths: () => null,
          value: (_u, v) => W.formatNumber(v),
          points: { show: true, size: 8, width: 1.5, stroke: '#1f6feb', fill: '#1f6feb', space: 0 },
        },
        {
          label: 'best so far',
          stroke: '#1a7f37',
          width: 2,
          paths: U.paths.stepped({ align: 1 }),
          value: (_u, v) => W.formatNumber(v),
          points: { show: false },
        },
        mark('submission error', '#bf8700', 'triangle'),
        mark('rule violation', '#cf222e', 'cross'),
        mark('verifier failed', '#8250df', 'square'),
      ],
    };
  }

  function drawChart(t) {
    const host = A.$('chart');
    const s = W.trajectorySeries(t);
    if (typeof window.uPlot !== 'function') {
      host.removeAttribute('data-points');
      A.clear(host).appendChild(muted('The chart library (vendor/uPlot.iife.min.js) did not load.'));
      return;
    }
    // the number of rounds in the plotted data (one x each; the completion time's extra point is not a round), for tests
    host.setAttribute('data-points', String(s.rounds.filter((r) => r !== null).length));
    if (s.data[0].length === 0) {
      if (plot) plot.destroy();
      plot = null;
      A.clear(host).appendChild(muted('No rounds yet.'));
      return;
    }
    if (plot && plot.assayKey === `${t.metric}|${s.direction}`) {
      plot.setData(s.data);
      return;
    }
    if (plot) plot.destroy();
    A.clear(host);
    const width = Math.max(320, host.clientWidth || 800);
    plot = new window.uPlot(chartOptions(t, width), s.data, host);
    plot.assayKey = `${t.metric}|${s.direction}`;
  }

  let resizeQueued = false;
  window.addEventListener('resize', () => {
    if (resizeQueued) return;
    resizeQueued = true;
    window.requestAnimationFrame(() => {
      resizeQueued = false;
      if (plot) plot.setSize({ width: Math.max(320, A.$('chart').clientWidth || 800), height: CHART_HEIGHT });
    });
  });

  // ---- summary and rounds ----------------------------------------------------------------------------------------

  function summary(t) {
    const rounds = Array.isArray(t.rounds) ? t.rounds.filter(isObj) : [];
    const last = rounds[rounds.length - 1];
    const best = last && typeof last.bestSoFar === 'number' ? last : null;
    const started = Date.parse(t.startedAt);
    const ended = Date.parse(t.completedAt);
    return A.kv([
      ['task', typeof t.task === 'string' ? el('a', { href: A.pageLink('leaderboard.html', 'task', t.task), text: t.task }) : null],
      ['agent', typeof t.agent === 'string' ? t.agent : null],
      ['status', A.statusSpan(t.status)],
      ['metric, direction', `${typeof t.metric === 'string' ? t.metric : '(the primary score)'}, ${t.direction === 'minimize' ? 'minimize' : 'maximize'}`],
      ['started', typeof t.startedAt === 'string' ? t.startedAt : null],
      ['completed', typeof t.completedAt === 'string' ? `${t.completedAt} (wall time ${W.formatMs(ended - started)})` : muted('not yet')],
      ['rounds', String(rounds.length)],
      [
        'best so far',
        best ? el('span', {}, A.numSpan(best.bestSoFar), typeof best.bestRoundSoFar === 'number' ? ` in round ${best.bestRoundSoFar}` : '') : muted('none'),
      ],
      ['source', typeof t.source === 'string' ? t.source : null],
    ]);
  }

  async function showLog(run, round) {
    const section = A.$('log');
    const text = A.$('log-text');
    section.hidden = false;
    A.$('log-title').textContent = `Judge log of round ${round}`;
    text.textContent = 'loading…';
    try {
      const log = await A.getText(`/runs/${enc(run)}/rounds/${enc(String(round))}/log`);
      text.textContent = log.length > MAX_LOG_CHARS ? log.slice(0, MAX_LOG_CHARS) + `\n… (${log.length - MAX_LOG_CHARS} more characters)` : log;
    } catch (e) {
      text.textContent = e && e.status === 404 ? `The API has no Judge log for round ${round}.` : `Could not load the log: ${e && e.message ? e.message : e}`;
    }
    section.scrollIntoView({ block: 'nearest' });
  }

  function roundsTable(t) {
    const run = String(t.run);
    const rounds = Array.isArray(t.rounds) ? t.rounds.filter(isObj) : [];
    const text = (v) => (v === null || v === undefined ? muted('—') : String(v));
    const columns = [
      { label: 'round', value: (r) => r.round, render: (r) => text(r.round), className: 'n' },
      {
        label: 'elapsed',
        value: (r) => r.elapsedMs,
        render: (r) => el('span', { title: typeof r.at === 'string' ? r.at : '', text: W.formatMs(r.elapsedMs) }),
        className: 'n',
      },
      { label: 'status', value: (r) => r.status, render: (r) => A.statusSpan(r.status) },
      { label: 'score', value: (r) => r.score, render: (r) => A.numSpan(r.score), className: 'n' },
      { label: 'eligible', value: (r) => r.eligible, render: (r) => (r.eligible === true ? 'yes' : muted('no')) },
      {
        label: 'best so far',
        value: (r) => r.bestSoFar,
        render: (r) => el('span', {}, A.numSpan(r.bestSoFar), typeof r.bestRoundSoFar === 'number' ? muted(` (round ${r.bestRoundSoFar})`) : ''),
        className: 'n',
      },
      { label: 'snapshot', value: (r) => r.snapshot, render: (r) => A.cidSpan(r.snapshot) },
      {
        label: 'Judge log',
        value: (r) => r.round,
        render: (r) =>
          typeof r.round === 'number'
            ? el('a', {
                href: A.apiUrl(`/runs/${enc(run)}/rounds/${enc(String(r.round))}/log`),
                text: 'log',
                onclick: (ev) => {
                  ev.preventDefault();
                  showLog(run, r.round);
                },
              })
            : muted('—'),
      },
    ];
    return A.sortableTable(columns, rounds, { empty: 'no rounds yet', state: tableState });
  }

  function render(t) {
    if (!isObj(t)) throw new A.ApiError(0, 'UI_BAD_TRAJECTORY', 'the trajectory is not a JSON object');
    A.$('run').textContent = typeof t.run === 'string' ? t.run : '';
    A.clear(A.$('summary')).appendChild(summary(t));
    drawChart(t);
    A.clear(A.$('rounds')).appendChild(roundsTable(t));
  }

  // ---- report ----------------------------------------------------------------------------------------------------

  async function loadReport(run, gen) {
    const host = A.$('report');
    let report;
    try {
      report = await A.getJson(`/runs/${enc(run)}/report`);
    } catch (e) {
      if (gen !== generation) return;
      A.clear(host).appendChild(muted(e && e.status === 404 ? 'No report for this run.' : `Could not load the report: ${e && e.message ? e.message : e}`));
      return;
    }
    if (gen !== generation) return;
    A.clear(host);
    if (!isObj(report)) {
      host.appendChild(A.renderValue(report));
      return;
    }
    const scalars = Object.keys(report).filter((k) => !isObj(report[k]) && !Array.isArray(report[k]));
    if (scalars.length) host.appendChild(A.kv(scalars.map((k) => [k, A.renderValue(report[k])])));
    for (const k of Object.keys(report)) {
      if (scalars.includes(k)) continue;
      host.appendChild(el('section', { class: 'report-part' }, el('h3', { text: k }), A.renderValue(report[k])));
    }
  }

  // ---- live updates ----------------------------------------------------------------------------------------------

  function finished(t, run, gen) {
    setLive(`The run is ${typeof t.status === 'string' ? t.status : 'not running'}: no more updates.`);
    loadReport(run, gen);
  }

  function startPolling(run, gen) {
    setLive(`Live stream unavailable: checking every ${POLL_MS / 1000} s.`);
    poll = setInterval(async () => {
      if (gen !== generation) return;
      try {
        const t = await A.getJson(`/runs/${enc(run)}/trajectory`);
        if (gen !== generation) return;
        render(t);
        if (t.status !== 'running') {
          stopUpdates();
          finished(t, run, gen);
        }
      } catch (e) {
        setLive(`Update failed (${e && e.code ? e.code : 'error'}): trying again in ${POLL_MS / 1000} s.`);
      }
    }, POLL_MS);
  }

  function startLive(run, gen) {
    live = A.follow(`/runs/${enc(run)}/live`, {
      onEvent: (ev) => {
        if (gen !== generation) return false;
        if (ev.event !== 'trajectory') return true;
        let t;
        try {
          t = JSON.parse(ev.data);
          render(t);
        } catch (e) {
          A.showError(e, 'live update');
          return true;
        }
        setLive(`Live: updated ${new Date().toLocaleTimeString()}.`);
        if (t.status !== 'running') {
          finished(t, run, gen);
          return false;
        }
        return true;
      },
      onState: (state, detail) => {
        if (gen !== generation) return;
        if (state === 'connecting') setLive('Live: connecting…');
        else if (state === 'connected') setLive('Live: connected, waiting for changes.');
        else if (state === 'retry') setLive(`Live: connection lost, reconnecting in ${Math.round(detail / 1000)} s.`);
        else if (state === 'unavailable') {
          live = null;
          if (detail && (detail.status === 401 || detail.status === 403)) {
            A.showError(detail, 'live updates');
            setLive('Live updates refused: set a token that may read this run, or reload.');
          } else startPolling(run, gen);
        }
      },
    });
  }

  A.page(async () => {
    stopUpdates();
    const gen = ++generation;
    const run = A.query('run');
    if (run === null || run === '') {
      A.showError({ code: 'UI_NO_RUN', message: 'no run given: open a run from a leaderboard' });
      return;
    }
    A.$('run').textContent = run;
    document.title = `Assay: run ${run}`;
    setLive('loading…');
    let t;
    try {
      t = await A.getJson(`/runs/${enc(run)}/trajectory`);
    } catch (e) {
      setLive('');
      throw e;
    }
    if (gen !== generation) return;
    render(t);
    loadReport(run, gen);
    if (t.status === 'running') startLive(run, gen);
    else setLive(`The run is ${typeof t.status === 'string' ? t.status : 'not running'}.`);
  });
})();
