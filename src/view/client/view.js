// The a2rl view's client: follows the page's live stream (Server-Sent Events) and applies what it pushes. No build
// step, no dependency but uPlot for the charts. Served as is from /view/assets/view.js; the same file runs as the
// SharedWorker that holds a browser's one live connection for all its tabs (liveHub).
'use strict';

/**
 * One live connection for every tab of a browser (issue 51: a browser opens at most 6 HTTP/1.1 connections to a host
 * and each stream holds one, so a 7th tab hung). The hub holds one EventSource that carries each subscribed tab's
 * stream as a channel (`c=<tab> <page's live URL>`, src/view/streams.ts), hands each message to its tab, and keeps
 * where each tab is (its last event id and log offsets), so it connects again from there: after an error, and when a
 * tab comes or goes (the connection's URL names its tabs). A tab whose stream failed leaves it; an error the server
 * answers with a 4xx stops it (retrying cannot help); other errors are retried after 2, 4 … 60 s.
 */
function liveHub() {
  /** Tabs one connection carries at most (src/view/live.ts maxChannels): a further tab is refused, visibly. */
  const maxTabs = 30;
  const tabs = new Map();
  let source = null;
  let timer = null;
  /** Seconds before the next try after an error; back to the first once a connection opens. */
  let backoff = 2;
  const all = (message) => tabs.forEach((tab) => tab.deliver(message));

  /** The status the live URL answers now (an EventSource tells none), its stream closed once its headers came. */
  async function statusOf(url) {
    const abort = new AbortController();
    try {
      return (await fetch(url, { signal: abort.signal, credentials: 'same-origin' })).status;
    } catch {
      return 0;
    } finally {
      abort.abort();
    }
  }

  function follow(tab, { event, id, data }) {
    if (typeof id === 'number') tab.live.searchParams.set('after', String(id));
    if (event !== 'log') return;
    const logs = new Map(
      (tab.live.searchParams.get('logs') || '')
        .split(',')
        .filter(Boolean)
        .map((pair) => pair.split(':')),
    );
    // A finished job's log read whole is forgotten by the server: naming it again would only grow the URL.
    if (data.done) logs.delete(String(data.id));
    else logs.set(String(data.id), String(data.next));
    if (logs.size > 0) tab.live.searchParams.set('logs', [...logs].map((pair) => pair.join(':')).join(','));
    else tab.live.searchParams.delete('logs');
  }

  function connect(delay) {
    clearTimeout(timer);
    // Tabs that come together (a restored session) share one new connection.
    timer = setTimeout(() => {
      source?.close();
      source = null;
      if (tabs.size === 0) return;
      const url = new URL('/view/live', self.location.href);
      for (const [name, tab] of tabs) url.searchParams.append('c', `${name} ${tab.live.pathname}${tab.live.search}`);
      const carried = [...tabs.values()];
      const current = new EventSource(url);
      source = current;
      // Live: the tabs this connection carries (one that came since waits for the next).
      current.onopen = () => {
        backoff = 2;
        carried.forEach((tab) => tab.deliver({ event: 'state', data: 'live' }));
      };
      current.onmessage = (message) => {
        const parsed = JSON.parse(message.data);
        const tab = tabs.get(parsed.ch);
        if (!tab) return;
        follow(tab, parsed);
        tab.deliver(parsed);
        // The server dropped that tab's stream alone: it is not asked for again.
        if (parsed.event === 'failed') tabs.delete(parsed.ch);
      };
      // Connected again by hand, from where each tab is now, not the URL the connection first opened.
      current.onerror = async () => {
        current.close();
        const status = await statusOf(url);
        // A tab came or went meanwhile, and a new connection is on its way.
        if (source !== current) return;
        source = null;
        if (status === 401 || status === 403) {
          return all({ event: 'state', data: 'Not live: log in again (a2rl view-token --link <this server’s URL>).' });
        }
        if (status >= 400 && status < 500) return all({ event: 'state', data: `Not live (HTTP ${status}): reload the page.` });
        all({ event: 'state', data: `reconnecting in ${backoff} s…` });
        connect(backoff * 1000);
        backoff = Math.min(60, backoff * 2);
      };
    }, delay);
  }

  const hub = {
    subscribe(name, live, deliver) {
      if (!tabs.has(name) && tabs.size >= maxTabs) {
        return deliver({ event: 'failed', data: { message: `${maxTabs} view tabs follow live already: close one and reload this page.` } });
      }
      tabs.set(name, { live: new URL(live, self.location.href), deliver });
      connect(50);
      // Each tab holds a lock named after it while it is open: granted here once it went, however it went.
      self.navigator.locks?.request(`a2rl-view-tab-${name}`, () => hub.unsubscribe(name));
    },
    unsubscribe(name) {
      if (tabs.delete(name)) connect(50);
    },
  };
  return hub;
}

/** The SharedWorker: one hub for every tab that connects. */
function sharedWorker() {
  const hub = liveHub();
  self.onconnect = ({ ports: [port] }) => {
    port.onmessage = ({ data }) => {
      if (data.subscribe) hub.subscribe(data.subscribe.name, data.subscribe.live, (message) => port.postMessage(message));
      else if (data.bye) hub.unsubscribe(data.bye);
    };
  };
}

function viewPage() {
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
    const entry = { plot, data, shift: 0 };
    charts.set(element, entry);
    return entry;
  }

  function addPoints(element, points, label) {
    const entry = chart(element, label);
    if (!entry) return;
    // A loss curve's x only grows: one the server read again after a reconnect may count from lower down.
    const last = entry.data[0].at(-1);
    if (label === 'loss' && points.length > 0 && last !== undefined && points[0][0] + entry.shift <= last) {
      entry.shift = last + 1 - points[0][0];
    }
    for (const [x, y] of points) {
      entry.data[0].push(x + entry.shift);
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
    // A log opens at its newest line; appendLog keeps it there while the reader has not scrolled up.
    for (const pre of root.querySelectorAll('pre.log')) pre.scrollTop = pre.scrollHeight;
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
      // A run that no longer matches the page's filters leaves it.
      if (html === null) return existing?.remove();
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
      applySearch();
    },
    job({ id, card, status: line }) {
      const existing = document.getElementById(`card-${id}`);
      if (card && !existing) {
        const jobs = document.getElementById('jobs');
        jobs.querySelector('.none')?.remove();
        jobs.insertAdjacentHTML('beforeend', card);
        initCharts(document.getElementById(`card-${id}`));
      } else if (line && existing) existing.querySelector('.status').innerHTML = line;
    },
    log({ id, text, skipped, points }) {
      const card = document.getElementById(`card-${id}`);
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
    state(text) {
      setStatus(text);
    },
  };

  function logOffsets() {
    return [...document.querySelectorAll('.job[data-offset]')].map((card) => `${card.dataset.job}:${card.dataset.offset}`).join(',');
  }

  let lastId = null;
  /** The page's live URL as of now: from its last event and log offsets, not the URL it first opened. */
  function liveUrl() {
    const url = new URL(live, location.href);
    if (lastId !== null) url.searchParams.set('after', lastId);
    const offsets = logOffsets();
    if (offsets) url.searchParams.set('logs', offsets);
    return `${url.pathname}${url.search}`;
  }

  function receive({ event, id, data }) {
    if (typeof id === 'number') lastId = id;
    if (event === 'log') {
      const card = document.getElementById(`card-${data.id}`);
      // A finished job's log read whole leaves the live URL (see liveHub's follow).
      if (card && data.done) delete card.dataset.offset;
      else if (card) card.dataset.offset = String(data.next);
    }
    handlers[event]?.(data);
  }

  /** This tab's lock, held while it is open: the hub's sign that it went (see liveHub). */
  function holdingTabLock(name, then) {
    if (!navigator.locks) return then();
    navigator.locks.request(`a2rl-view-tab-${name}`, () => {
      then();
      return new Promise(() => {});
    });
  }

  /**
   * Joins the browser's live connection: through the SharedWorker where there is one; else the tabs elect a leader
   * (a Web Lock) whose page runs the hub and relays over a BroadcastChannel (a new leader asks the tabs to subscribe
   * again); else (neither) this page connects alone.
   */
  function join() {
    const name = `${Date.now().toString(36)}${Math.random().toString(36).slice(2)}`;
    const subscription = () => ({ subscribe: { name, live: liveUrl() } });
    let post;
    let lead = null;
    if (window.SharedWorker) {
      const worker = new SharedWorker('/view/assets/view.js', { name: 'a2rl-view-live' });
      worker.port.onmessage = ({ data }) => receive(data);
      post = (message) => worker.port.postMessage(message);
    } else if (window.BroadcastChannel && navigator.locks) {
      const channel = new BroadcastChannel('a2rl-view-live');
      let hub = null;
      channel.onmessage = ({ data }) => {
        if (data.to === name) receive(data.message);
        else if (data.leader) channel.postMessage(subscription());
        else if (hub && data.subscribe) {
          const tab = data.subscribe.name;
          hub.subscribe(tab, data.subscribe.live, (message) => channel.postMessage({ to: tab, message }));
        } else if (hub && data.bye) hub.unsubscribe(data.bye);
      };
      post = (message) => channel.postMessage(message);
      lead = () =>
        navigator.locks.request('a2rl-view-leader', () => {
          hub = liveHub();
          hub.subscribe(name, liveUrl(), receive);
          channel.postMessage({ leader: true });
          return new Promise(() => {});
        });
    } else {
      return liveHub().subscribe(name, liveUrl(), receive);
    }
    holdingTabLock(name, () => {
      post(subscription());
      lead?.();
    });
    addEventListener('pagehide', () => post({ bye: name }));
    addEventListener('pageshow', (event) => event.persisted && post(subscription()));
  }

  // A run page's search box: shows the tool calls (live rows too) and transcript lines holding all its words, unfolding
  // the matching calls' arguments.
  const search = document.getElementById('run-search');
  function applySearch() {
    if (!search) return;
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    const items = document.querySelectorAll('#tools tbody tr, #transcript .line');
    for (const item of items) {
      const match = words.every((word) => item.textContent.toLowerCase().includes(word));
      item.hidden = !match;
      if (match) shown++;
      for (const folded of item.querySelectorAll('details')) folded.open = words.length > 0 && match;
    }
    document.getElementById('run-search-count').textContent = words.length ? `${shown} of ${items.length} match` : '';
  }
  search?.addEventListener('input', applySearch);

  initCharts(document);
  if (live) join();
}

if (typeof document === 'undefined') sharedWorker();
else viewPage();
