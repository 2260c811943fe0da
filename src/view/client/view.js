// The a2rl view's client: follows the page's live stream (Server-Sent Events) and applies what it pushes. No build
// step, no dependency but uPlot for the charts. Served as is from /view/assets/view.js.
'use strict';

(() => {
  const live = document.body.dataset.live;
  const status = document.getElementById('live-state');
  /** Lines a job's log tail keeps on the page. */
  const maxLogLines = 400;
  const charts = new Map();

  const setStatus = (text) => {
    if (status) status.textContent = text;
  };

  function chart(element, label) {
    if (!window.uPlot || charts.has(element)) return charts.get(element);
    const points = JSON.parse(element.dataset.curve || '[]');
    const data = [points.map((p) => p[0]), points.map((p) => p[1])];
    const width = Math.max(240, Math.min(element.parentElement.clientWidth || 600, 900));
    const plot = new window.uPlot(
      {
        width,
        height: 220,
        scales: { x: { time: false } },
        axes: [{ stroke: '#222' }, { stroke: '#222' }],
        series: [{ label: element.id === 'rewards' ? 'seconds' : 'step' }, { label, stroke: '#0b5cad', width: 2, points: { show: true } }],
      },
      data,
      element,
    );
    const entry = { plot, data };
    charts.set(element, entry);
    return entry;
  }

  function addPoints(element, points, label) {
    const entry = chart(element, label);
    if (!entry) return;
    for (const [x, y] of points) {
      entry.data[0].push(x);
      entry.data[1].push(y);
    }
    entry.plot.setData(entry.data);
    element.dataset.points = String(entry.data[0].length);
    element.hidden = false;
  }

  function initCharts(root) {
    for (const element of root.querySelectorAll('.chart')) {
      if (element.id !== 'rewards' && element.dataset.points === '0') element.hidden = true;
      if (element.dataset.points !== '0') chart(element, element.id === 'rewards' ? 'mean reward' : 'loss');
    }
  }

  function appendLog(card, text, skipped) {
    const pre = card.querySelector('pre.log');
    const nearBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    const lines = (pre.textContent + (skipped > 0 ? `… ${skipped} bytes not shown\n` : '') + text).split('\n');
    pre.textContent = lines.slice(-maxLogLines).join('\n');
    if (nearBottom) pre.scrollTop = pre.scrollHeight;
  }

  const handlers = {
    row({ id, html }) {
      const body = document.querySelector('#runs tbody');
      const existing = body && [...body.rows].find((row) => row.dataset.run === id);
      const template = document.createElement('template');
      template.innerHTML = `<table><tbody>${html}</tbody></table>`;
      const row = template.content.querySelector('tr');
      if (existing) existing.replaceWith(row);
      else if (body) body.prepend(row);
    },
    section({ id, html }) {
      const element = document.getElementById(id);
      if (element) element.innerHTML = html;
    },
    tools({ html }) {
      const body = document.querySelector('#tools tbody');
      if (!body) return;
      body.insertAdjacentHTML('afterbegin', html);
      while (body.rows.length > 500) body.deleteRow(-1);
    },
    job({ id, card, status: line }) {
      const existing = document.getElementById(`job-${id}`);
      if (card && !existing) {
        const jobs = document.getElementById('jobs');
        jobs.querySelector('.none')?.remove();
        jobs.insertAdjacentHTML('beforeend', card);
        initCharts(document.getElementById(`job-${id}`));
      } else if (line && existing) existing.querySelector('.status').innerHTML = line;
    },
    log({ id, text, skipped, points }) {
      const card = document.getElementById(`job-${id}`);
      if (!card) return;
      appendLog(card, text, skipped);
      const element = card.querySelector('.chart');
      if (element && points.length > 0) addPoints(element, points, 'loss');
    },
    reward({ point }) {
      const element = document.getElementById('rewards');
      element.parentElement.querySelector('.none')?.remove();
      addPoints(element, [point], 'mean reward');
    },
    failed({ message }) {
      setStatus(message);
    },
  };

  function logOffsets() {
    return [...document.querySelectorAll('.job[data-job]')].map((card) => `${card.dataset.job}:${card.dataset.offset}`).join(',');
  }

  let lastId = null;
  function connect() {
    const url = new URL(live, location.href);
    if (lastId !== null) url.searchParams.set('after', lastId);
    const offsets = logOffsets();
    if (offsets) url.searchParams.set('logs', offsets);
    const source = new EventSource(url);
    source.onopen = () => setStatus('live');
    for (const [name, handle] of Object.entries(handlers)) {
      source.addEventListener(name, (message) => {
        if (message.lastEventId) lastId = message.lastEventId;
        const data = JSON.parse(message.data);
        if (name === 'log') {
          const card = document.getElementById(`job-${data.id}`);
          if (card) card.dataset.offset = String(data.next);
        }
        handle(data);
      });
    }
    // Reconnect by hand with where the page is now (last event, log offsets), not the URL it first opened.
    source.onerror = () => {
      source.close();
      setStatus('reconnecting…');
      setTimeout(connect, 2000);
    };
  }

  initCharts(document);
  if (live) connect();
})();
