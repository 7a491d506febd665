/** The task list: GET /tasks → { tasks: [{ task, runs, imported }] }, each a link to its leaderboard. */
(function () {
  'use strict';
  const A = window.Assay;

  A.page(async () => {
    const status = A.$('status');
    const list = A.clear(A.$('tasks'));
    status.textContent = 'loading…';
    let body;
    try {
      body = await A.getJson('/tasks');
    } catch (e) {
      status.textContent = '';
      throw e;
    }
    const tasks = body && Array.isArray(body.tasks) ? body.tasks.filter((t) => t && typeof t === 'object' && typeof t.task === 'string') : [];
    status.textContent = tasks.length === 0 ? 'No runs recorded yet.' : `${tasks.length} task${tasks.length === 1 ? '' : 's'}`;
    for (const t of tasks) {
      const runs = typeof t.runs === 'number' && Number.isFinite(t.runs) ? t.runs : null;
      const imported = typeof t.imported === 'number' && Number.isFinite(t.imported) && t.imported > 0 ? t.imported : null;
      list.appendChild(
        A.el(
          'li',
          {},
          A.el('a', { href: A.pageLink('leaderboard.html', 'task', t.task), class: 'task', text: t.task }),
          runs === null ? null : A.el('span', { class: 'muted', text: ` ${runs} run${runs === 1 ? '' : 's'}` }),
          imported === null ? null : A.el('span', { class: 'badge badge-imported', text: `${imported} imported` }),
        ),
      );
    }
  });
})();
