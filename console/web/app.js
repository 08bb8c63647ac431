// The console page's code: reads the console's JSON API (every request carries the session's token in a header),
// draws each job with PacedCharts (charts.js, uPlot), and runs the changing actions behind a confirmation dialog.
// Data is only ever put in the page as text (textContent), never as HTML: a DLQ body is anyone's text. An ES module
// (index.html), so its names are its own and it runs after charts.js, once the page is parsed.
var TOKEN_KEY = 'paced-console-token';
var meta = document.querySelector('meta[name="console-token"]');
var token = meta && meta.getAttribute('content') ? meta.getAttribute('content') : null;
// The token lives in this tab only: sessionStorage survives a reload, not the tab; the DOM and the address bar drop it.
try {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else token = sessionStorage.getItem(TOKEN_KEY);
} catch (e) {
  /* storage off: the token stays in memory, and a reload needs the printed URL again */
}
if (meta) meta.setAttribute('content', '');
if (location.search) history.replaceState(null, '', location.pathname);

var config = null;
var sections = new Map();
var chartsDrawn = new Set();

// ---- DOM helpers ---------------------------------------------------------------------------------------------

function el(tag, attrs) {
  var node = document.createElement(tag);
  if (attrs) {
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k === 'text') node.textContent = String(v);
      else if (k === 'className') node.className = v;
      else node.setAttribute(k, v === true ? '' : String(v));
    });
  }
  for (var i = 2; i < arguments.length; i++) {
    var c = arguments[i];
    if (c === undefined || c === null) continue;
    node.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

function table(head, rows) {
  var t = el('table');
  var tr = el('tr');
  head.forEach(function (h) {
    tr.appendChild(el('th', { text: h }));
  });
  t.appendChild(el('thead', null, tr));
  var body = el('tbody');
  rows.forEach(function (r) {
    var row = el('tr');
    r.forEach(function (c) {
      if (c && c.nodeType) row.appendChild(el('td', null, c));
      else row.appendChild(el('td', { text: c === undefined || c === null ? '-' : String(c) }));
    });
    body.appendChild(row);
  });
  t.appendChild(body);
  return t;
}

function time(iso) {
  return iso
    ? String(iso)
        .replace('T', ' ')
        .replace(/\.\d{3}Z$/, 'Z')
    : '-';
}

function setStatus(text, isError) {
  var line = document.getElementById('status-line');
  line.textContent = text;
  line.className = isError ? 'error-text' : 'muted';
}

// ---- the API -------------------------------------------------------------------------------------------------

function ApiError(status, name, message) {
  this.status = status;
  this.name = name;
  this.message = message;
}

function api(method, path, body) {
  var headers = { 'X-Console-Token': token || '' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  return fetch(path, {
    method: method,
    headers: headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit',
  }).then(function (res) {
    return res
      .json()
      .catch(function () {
        return {};
      })
      .then(function (doc) {
        if (!res.ok) {
          var e = doc && doc.error ? doc.error : { name: 'Error', message: 'HTTP ' + res.status };
          if (res.status === 403 && /token/.test(e.message)) showNoToken();
          throw new ApiError(res.status, e.name, e.message);
        }
        return doc;
      });
  });
}

function showNoToken() {
  document.getElementById('no-token').hidden = false;
}

// ---- the confirmation dialog ---------------------------------------------------------------------------------

function confirmAction(title, text, command) {
  var dialog = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-command').textContent = command ? 'same as: ' + command : '';
  return new Promise(function (resolve) {
    var ok = document.getElementById('confirm-ok');
    var cancel = document.getElementById('confirm-cancel');
    function done(answer) {
      ok.removeEventListener('click', onOk);
      cancel.removeEventListener('click', onCancel);
      dialog.removeEventListener('cancel', onCancel);
      if (dialog.open) dialog.close();
      resolve(answer);
    }
    function onOk() {
      done(true);
    }
    function onCancel() {
      done(false);
    }
    ok.addEventListener('click', onOk);
    cancel.addEventListener('click', onCancel);
    dialog.addEventListener('cancel', onCancel);
    dialog.showModal();
    cancel.focus();
  });
}

// ---- one job's section ---------------------------------------------------------------------------------------

function jobSection(job) {
  var s = {
    root: el('section', { className: 'job panel', 'data-job': job }),
    badge: el('span', { className: 'badge', 'data-state': 'unknown', text: '…' }),
    schedule: el('p', { className: 'schedule' }),
    mappings: el('p', { className: 'mappings muted' }),
    depths: el('div', { className: 'depths' }),
    batches: el('div', { className: 'batches' }),
    charts: el('div', { className: 'charts', 'data-job': job }),
    result: el('div', { className: 'result' }),
    dlq: el('div', { className: 'dlq-result' }),
    buttons: [],
  };
  s.root.appendChild(el('h2', null, job, ' ', s.badge));
  s.root.appendChild(s.schedule);
  s.root.appendChild(s.mappings);
  s.root.appendChild(s.depths);
  s.root.appendChild(el('h3', { text: 'Charts' }));
  s.root.appendChild(s.charts);
  s.root.appendChild(el('h3', { text: 'Latest batches' }));
  s.root.appendChild(s.batches);
  s.root.appendChild(el('h3', { text: 'Actions' }));
  s.root.appendChild(actions(job, s));
  s.root.appendChild(s.result);
  s.root.appendChild(el('h3', { text: 'Dead-letter queue' }));
  s.root.appendChild(dlqPanel(job, s));
  s.root.appendChild(s.dlq);
  return s;
}

function button(label, action, job, s, changing) {
  var b = el('button', { type: 'button', 'data-action': action, 'data-job': job, text: label });
  if (changing && !config.changesAllowed) {
    b.disabled = true;
    b.title = config.changesNote || 'changes are off';
  }
  s.buttons.push({ node: b, changing: changing });
  return b;
}

function busy(s, on) {
  s.buttons.forEach(function (b) {
    b.node.disabled = on || (b.changing && !config.changesAllowed);
  });
}

function runAction(s, title, text, command, path, body, render) {
  return confirmAction(title, text, command).then(function (yes) {
    if (!yes) return;
    busy(s, true);
    clear(s.result).appendChild(el('p', { className: 'muted', text: title + '…' }));
    return api('POST', path, body)
      .then(function (doc) {
        clear(s.result).appendChild(render(doc));
        refreshOverview();
      })
      .catch(function (e) {
        clear(s.result).appendChild(
          el('p', {
            className: 'error-text',
            'data-error': e.name,
            text: title + ' failed: ' + e.name + ': ' + e.message,
          })
        );
      })
      .then(function () {
        busy(s, false);
      });
  });
}

function renderSteps(doc) {
  return table(
    ['step', 'what', 'target', 'before', 'after'],
    doc.steps.map(function (st, i) {
      return [
        i + 1,
        st.kind,
        st.target,
        st.before,
        !st.needed ? st.before + ' (unchanged)' : st.applied ? st.desired : st.desired + ' (not applied)',
      ];
    })
  );
}

function renderRedrive(doc) {
  return table(
    ['job', 'DLQ messages', 'action', 'task', 'note'],
    doc.jobs.map(function (j) {
      return [j.job, j.dlqMessages, j.action, j.task && j.task.taskHandle, j.reason];
    })
  );
}

function renderCatchUp(doc) {
  if (doc.missed && doc.missed.missing.length === 0)
    return el('p', { text: 'no missed business dates since ' + doc.missed.since + ': nothing to run' });
  return table(
    ['business date', 'batch', 'status', 'discovered', 'published'],
    doc.runs.map(function (r) {
      var sum = r.summary || {};
      return [r.businessDate, r.batchId, r.status, sum.discovered, sum.published];
    })
  );
}

// Pause and Resume: the job's three switches, in the order ops pause and ops resume turn them.
function pauseResumeRow(job, s) {
  var row = el('div', { className: 'row' });
  var pause = button('Pause', 'pause', job, s, true);
  pause.addEventListener('click', function () {
    runAction(
      s,
      'Pause ' + job,
      "Disables the schedule first (no new runs), then the producer's admission mapping, then the consumer's event source mapping, and waits until each is Disabled. Messages and each run's next admission step stay queued.",
      'ops pause --job ' + job,
      '/api/pause',
      { job: job },
      renderSteps
    );
  });
  var resume = button('Resume', 'resume', job, s, true);
  resume.addEventListener('click', function () {
    runAction(
      s,
      'Resume ' + job,
      "Re-enables the consumer's event source mapping first, then admission, then the schedule. A run that was admitting goes on from the cursor in its ledger item.",
      'ops resume --job ' + job,
      '/api/resume',
      { job: job },
      renderSteps
    );
  });
  row.appendChild(pause);
  row.appendChild(resume);
  return row;
}

// Redrive the DLQ at the rate the operator picks.
function redriveRow(job, s) {
  var row = el('div', { className: 'row' });
  var rate = el('input', {
    type: 'number',
    min: '1',
    max: '500',
    value: '10',
    'data-field': 'rate',
    'aria-label': 'redrive rate, messages per second',
  });
  var redrive = button('Redrive DLQ', 'redrive', job, s, true);
  redrive.addEventListener('click', function () {
    var r = rate.value;
    runAction(
      s,
      'Redrive ' + job,
      "Moves the DLQ's messages back to the work queue at " +
        r +
        ' messages per second (an SQS message move task). Operations already applied come back as no-ops (idempotency on the operation ID).',
      'ops redrive --job ' + job + ' --rate ' + r,
      '/api/redrive',
      { job: job, rate: Number(r) },
      renderRedrive
    );
  });
  row.appendChild(redrive);
  row.appendChild(el('label', null, ' at ', rate, ' msg/s'));
  return row;
}

// Catch up a range of business dates, or the dates the schedule missed.
function catchUpRow(job, s) {
  var row = el('div', { className: 'row' });
  var from = el('input', { type: 'date', 'data-field': 'from', 'aria-label': 'catch up from' });
  var to = el('input', { type: 'date', 'data-field': 'to', 'aria-label': 'catch up to' });
  var catchUp = button('Catch up dates', 'catch-up', job, s, true);
  catchUp.addEventListener('click', function () {
    var f = from.value;
    var t = to.value || f;
    if (!f) {
      clear(s.result).appendChild(el('p', { className: 'error-text', text: 'catch-up: pick the first business date' }));
      return;
    }
    runAction(
      s,
      'Catch up ' + job + ' ' + f + (t !== f ? ' to ' + t : ''),
      'Invokes the producer once per business date, oldest first, each as a new batch (marked backfill, behind live work).',
      'ops catch-up --job ' + job + ' --from ' + f + ' --to ' + t,
      '/api/catch-up',
      { job: job, from: f, to: t },
      renderCatchUp
    );
  });
  var missed = button('Catch up missed', 'catch-up-missed', job, s, true);
  missed.addEventListener('click', function () {
    runAction(
      s,
      'Catch up the missed dates of ' + job,
      "Works out from the schedule's cron which business dates of the last week have no batch in the run ledger, and runs those, oldest first.",
      'ops catch-up --job ' + job + ' --missed',
      '/api/catch-up',
      { job: job, missed: true },
      renderCatchUp
    );
  });
  row.appendChild(catchUp);
  row.appendChild(el('label', null, ' from ', from));
  row.appendChild(el('label', null, ' to ', to));
  row.appendChild(missed);
  return row;
}

function actions(job, s) {
  var wrap = el('div', { className: 'actions' });
  if (!config.changesAllowed)
    wrap.appendChild(el('p', { className: 'note', text: 'Changes are off: ' + (config.changesNote || '') }));
  wrap.appendChild(pauseResumeRow(job, s));
  wrap.appendChild(redriveRow(job, s));
  wrap.appendChild(catchUpRow(job, s));
  return wrap;
}

function dlqPanel(job, s) {
  var wrap = el('div', { className: 'dlq' });
  wrap.appendChild(el('p', { className: 'note', text: 'A peek is a receive \u2014 ' + config.peekWarning + '.' }));
  var peek = button('Peek at the DLQ', 'dlq-peek', job, s, false);
  peek.addEventListener('click', function () {
    confirmAction(
      'Peek at the DLQ of ' + job,
      'A peek is a receive \u2014 ' + config.peekWarning + '.',
      'ops dlq peek --job ' + job
    ).then(function (yes) {
      if (!yes) return;
      busy(s, true);
      api('POST', '/api/dlq-peek', { job: job, max: 10 })
        .then(function (doc) {
          renderPeek(s.dlq, doc);
        })
        .catch(function (e) {
          clear(s.dlq).appendChild(
            el('p', { className: 'error-text', text: 'peek failed: ' + e.name + ': ' + e.message })
          );
        })
        .then(function () {
          busy(s, false);
        });
    });
  });
  wrap.appendChild(peek);
  return wrap;
}

function renderPeek(node, doc) {
  clear(node);
  var messages = doc.jobs.length ? doc.jobs[0].messages : [];
  if (messages.length === 0) {
    node.appendChild(el('p', { text: 'the DLQ is empty' }));
    return;
  }
  node.appendChild(
    table(
      ['operation', 'batch', 'receives', 'failed at', 'failure reason', 'body'],
      messages.map(function (m) {
        return [
          m.operationId,
          m.batchId,
          m.receiveCount,
          time(m.failedAt || m.sentAt),
          m.failureReason || '(none: exhausted maxReceiveCount)',
          el('details', null, el('summary', { text: 'body' }), el('pre', { text: m.body })),
        ];
      })
    )
  );
}

// The job's schedule: its state, its next fire and business date, its expression.
function fillSchedule(s, j) {
  var sc = j.schedule;
  clear(s.schedule).appendChild(
    el(
      'span',
      null,
      'schedule ',
      el('span', { className: 'mono', text: sc.name }),
      ' is ',
      el('strong', { 'data-field': 'schedule-state', text: sc.state }),
      // A disabled schedule does not fire: its next fire is the one it would make once resumed.
      sc.nextFire ? (sc.state === 'ENABLED' ? ': next fire ' : ': once resumed, next fire ') : '',
      sc.nextFire ? el('strong', { 'data-field': 'next-fire', text: time(sc.nextFire) }) : '',
      sc.businessDate ? ' for business date ' : '',
      sc.businessDate ? el('strong', { 'data-field': 'business-date', text: sc.businessDate }) : '',
      sc.expression ? ' (' + sc.expression + ' ' + (sc.timeZone || '') + ')' : '',
      sc.error ? ' — ' + sc.error : ''
    )
  );
}

// The job's two event source mappings, and its allowance and SLO.
function fillMappings(s, j) {
  clear(s.mappings).appendChild(
    el(
      'span',
      null,
      'consumer mapping ',
      el('span', { 'data-mapping': 'consumer', text: j.mappings.consumer }),
      ', admission mapping ',
      el('span', { 'data-mapping': 'admission', text: j.mappings.admission }),
      j.limits.allowance
        ? ' · allowance ' + j.limits.allowance.starts + ' starts per ' + j.limits.allowance.intervalMs / 1000 + ' s'
        : '',
      j.limits.sloMinutes ? ' · SLO ' + j.limits.sloMinutes + ' min' : ''
    )
  );
}

// The job's queue, DLQ and admission queue depths, and the age of its oldest work.
function fillDepths(s, j) {
  clear(s.depths).appendChild(
    table(
      ['queued', 'in flight', 'delayed', 'DLQ', 'steps queued', 'steps delayed', 'oldest work (s)'],
      [
        [
          j.queue.visible,
          j.queue.inFlight,
          j.queue.delayed,
          j.dlq.visible + j.dlq.inFlight + j.dlq.delayed,
          j.admissionQueue.visible,
          j.admissionQueue.delayed,
          j.oldestWork.ageSeconds === null ? 'unknown' : j.oldestWork.ageSeconds,
        ],
      ]
    )
  );
  s.depths.firstChild.setAttribute('data-table', 'depths');
}

// The job's latest batches from the run ledger.
function fillBatches(s, j) {
  var rows = j.batches.map(function (b) {
    return [
      b.batchId,
      b.businessDate,
      b.discovered,
      b.completed,
      b.completedElsewhere,
      b.rejected,
      b.deadLettered,
      b.duplicates,
      b.deferred,
      b.throttled,
      b.invalidRows,
      b.outstanding,
      b.admission || 'none',
      el('span', { className: b.reconciles ? 'ok' : 'bad', text: b.reconciles ? 'yes' : 'NO' }),
      time(b.startedAt),
      time(b.finishedAt),
      b.stalled ? b.stalled.message : b.forecast ? b.forecast.text : '',
    ];
  });
  clear(s.batches).appendChild(
    rows.length
      ? table(
          [
            'batch',
            'date',
            'discovered',
            'completed',
            'elsewhere',
            'rejected',
            'DLQ',
            'dupes',
            'deferred',
            '429s',
            'invalid rows',
            'outstanding',
            'admission',
            'reconciles',
            'started',
            'finished',
            'note',
          ],
          rows
        )
      : el('p', { className: 'muted', text: 'no batch in the run ledger yet' })
  );
}

function fillSection(s, j) {
  var paused = j.paused;
  s.badge.textContent = paused ? 'paused' : 'running';
  s.badge.setAttribute('data-state', paused ? 'paused' : 'running');
  fillSchedule(s, j);
  fillMappings(s, j);
  fillDepths(s, j);
  fillBatches(s, j);
}

// ---- polling -------------------------------------------------------------------------------------------------

function refreshOverview() {
  return api('GET', '/api/overview')
    .then(function (doc) {
      doc.jobs.forEach(function (j) {
        var s = sections.get(j.job);
        if (s) fillSection(s, j);
      });
      setStatus('updated ' + time(doc.at));
    })
    .catch(function (e) {
      setStatus('overview failed: ' + e.message, true);
    });
}

function refreshCharts() {
  var minutes = document.getElementById('chart-minutes').value;
  return Promise.all(
    config.jobs.map(function (job) {
      return api('GET', '/api/charts?job=' + encodeURIComponent(job) + '&minutes=' + encodeURIComponent(minutes))
        .then(function (doc) {
          var s = sections.get(job);
          if (!s || !window.PacedCharts) return;
          if (chartsDrawn.has(job)) window.PacedCharts.update(s.charts, doc.charts);
          else {
            window.PacedCharts.render(s.charts, doc.charts);
            chartsDrawn.add(job);
          }
        })
        .catch(function (e) {
          setStatus('charts of ' + job + ' failed: ' + e.message, true);
        });
    })
  );
}

function every(ms, fn) {
  // A hidden tab polls nothing: against a deployed stack every poll is API calls (and CloudWatch's are billed).
  return setInterval(function () {
    if (!document.hidden) fn();
  }, ms);
}

// The idempotency record each job holds for the operation, if any.
function recordTable(doc) {
  return table(
    ['job', 'record', 'status', 'expires', 'result'],
    doc.jobs.map(function (j) {
      var r = j.idempotencyRecord;
      return [
        j.job,
        r ? r.id : 'none',
        r ? r.status + (r.expired ? ' (expired)' : '') : '-',
        r && r.expiresAt,
        r && r.result !== undefined ? JSON.stringify(r.result) : '-',
      ];
    })
  );
}

// One row per rejection of the operation, across the jobs.
function rejectionRows(doc) {
  var rejections = [];
  doc.jobs.forEach(function (j) {
    j.rejections.forEach(function (r) {
      rejections.push([j.job, time(r.rejectedAt), r.batchId, r.reasons.join('; ')]);
    });
  });
  return rejections;
}

// One row per batch that holds the operation, across the jobs.
function batchRows(doc) {
  var batches = [];
  doc.jobs.forEach(function (j) {
    j.batches.forEach(function (b) {
      batches.push([
        j.job,
        b.batchId,
        b.discovered,
        b.completed,
        b.rejected,
        b.deadLettered,
        b.reconciles ? 'yes' : 'NO',
      ]);
    });
  });
  return batches;
}

// What the lookup found of one operation: its idempotency record per job, its rejections, the batches that hold it.
function renderOperation(out, doc) {
  clear(out);
  if (
    !doc.found &&
    doc.jobs.every(function (j) {
      return j.batches.length === 0;
    })
  ) {
    out.appendChild(
      el('p', {
        'data-found': 'false',
        text:
          'operation ' +
          doc.operationId +
          ': no idempotency record or rejection in any job (never consumed, still queued, or its record expired)',
      })
    );
    return;
  }
  out.appendChild(recordTable(doc));
  out.firstChild.setAttribute('data-found', String(doc.found));
  var rejections = rejectionRows(doc);
  if (rejections.length) out.appendChild(table(['job', 'rejected at', 'batch', 'reasons'], rejections));
  var batches = batchRows(doc);
  if (batches.length)
    out.appendChild(table(['job', 'batch', 'discovered', 'completed', 'rejected', 'DLQ', 'reconciles'], batches));
}

function lookupPanel() {
  var select = document.getElementById('op-job');
  config.jobs.forEach(function (j) {
    select.appendChild(el('option', { value: j, text: j }));
  });
  var input = document.getElementById('op-id');
  var go = document.getElementById('op-go');
  var out = document.getElementById('op-result');
  function lookUp() {
    var id = input.value.trim();
    if (!id) return;
    go.disabled = true;
    api(
      'GET',
      '/api/operation?id=' + encodeURIComponent(id) + (select.value ? '&job=' + encodeURIComponent(select.value) : '')
    )
      .then(function (doc) {
        renderOperation(out, doc);
      })
      .catch(function (e) {
        clear(out).appendChild(el('p', { className: 'error-text', text: 'lookup failed: ' + e.message }));
      })
      .then(function () {
        go.disabled = false;
      });
  }
  go.addEventListener('click', lookUp);
  input.addEventListener('keydown', function (ev) {
    if (ev.key === 'Enter') lookUp();
  });
}

function start() {
  if (!token) {
    showNoToken();
    document.getElementById('stack').textContent = 'no token';
    return;
  }
  api('GET', '/api/config')
    .then(function (c) {
      config = c;
      document.getElementById('stack').textContent = c.description;
      var note = document.getElementById('changes-note');
      if (!c.changesAllowed) {
        note.hidden = false;
        note.textContent = 'Read-only: pause, resume, redrive and catch-up are off (' + (c.changesNote || '') + ').';
      }
      document.body.setAttribute('data-changes', c.changesAllowed ? 'on' : 'off');
      var main = document.getElementById('jobs');
      c.jobs.forEach(function (job) {
        var s = jobSection(job);
        sections.set(job, s);
        main.appendChild(s.root);
      });
      lookupPanel();
      document.getElementById('chart-minutes').addEventListener('change', refreshCharts);
      return Promise.all([refreshOverview(), refreshCharts()]).then(function () {
        document.body.setAttribute('data-ready', 'true');
        every(c.refresh.overviewMs, refreshOverview);
        every(c.refresh.chartsMs, refreshCharts);
      });
    })
    .catch(function (e) {
      document.getElementById('stack').textContent = 'the console could not start: ' + e.message;
    });
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();
