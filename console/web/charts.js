// The charts' renderer in the browser, for the console's page and the HTML reports alike: draws each ChartSpec
// (console/chartSpec.ts) with uPlot (the global `uPlot`, node_modules/uplot/dist/uPlot.iife.min.js), and redraws in
// place when the console polls. Plain JavaScript, no build step: the reports inline this very file. An ES module (the
// page's and the reports' <script type="module">), so its names are its own; its one global is `window.PacedCharts`.
var LINE_COLORS = ['#1f77b4', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#17becf', '#e377c2'];
var LIMIT_COLORS = ['#d62728', '#7f7f7f', '#bcbd22', '#000000'];
var HEIGHT = 220;
var MIN_WIDTH = 280;

/** Per chart root: its uPlot, the shape it was built for, and the points its last data held. */
var states = new WeakMap();

function uPlotOrThrow() {
  if (typeof window.uPlot !== 'function') {
    throw new Error('PacedCharts: uPlot is not loaded (include uPlot.iife.min.js before charts.js)');
  }
  return window.uPlot;
}

function checkSpec(chart) {
  if (!chart || typeof chart.id !== 'string' || !Array.isArray(chart.x) || !Array.isArray(chart.lines)) {
    throw new Error('PacedCharts: not a ChartSpec (needs id, x and lines): ' + JSON.stringify(chart && chart.id));
  }
  chart.lines.forEach(function (line) {
    if (!Array.isArray(line.values) || line.values.length !== chart.x.length) {
      throw new Error(
        'PacedCharts: chart ' +
          chart.id +
          ', line "' +
          line.label +
          '" has ' +
          (line.values && line.values.length) +
          ' values for ' +
          chart.x.length +
          ' x'
      );
    }
  });
}

function isLimit(line) {
  return line.kind === 'limit';
}

/** Non-null points across the non-limit lines: what `data-points` says, and what decides "no data yet". */
function pointsOf(chart) {
  var n = 0;
  chart.lines.forEach(function (line) {
    if (isLimit(line)) return;
    line.values.forEach(function (v) {
      if (v !== null && v !== undefined) n++;
    });
  });
  return n;
}

/** What a uPlot instance is built for: a change of lines or unit needs a new one; new values do not. */
function shapeOf(chart) {
  return (
    chart.unit +
    '|' +
    chart.lines
      .map(function (l) {
        return (l.kind || 'line') + ':' + l.label;
      })
      .join('|')
  );
}

function widthOf(el) {
  var w = el.clientWidth || (el.parentElement && el.parentElement.clientWidth) || 600;
  return Math.max(MIN_WIDTH, Math.floor(w));
}

function seriesOf(chart) {
  var lines = 0;
  var limits = 0;
  return [{}].concat(
    chart.lines.map(function (line) {
      if (isLimit(line)) {
        return {
          label: line.label,
          stroke: LIMIT_COLORS[limits++ % LIMIT_COLORS.length],
          width: 1.5,
          dash: [6, 4],
          points: { show: false },
        };
      }
      // Gauges are null where a bucket had no sample; joined, as a dashboard joins a sampled metric's points.
      return { label: line.label, stroke: LINE_COLORS[lines++ % LINE_COLORS.length], width: 2, spanGaps: true };
    })
  );
}

function dataOf(chart) {
  return [chart.x].concat(
    chart.lines.map(function (line) {
      return line.values;
    })
  );
}

function optionsOf(chart, body, state) {
  return {
    width: widthOf(body),
    height: HEIGHT,
    series: seriesOf(chart),
    scales: {
      y: {
        // From 0: a count or a depth read against its limit, not zoomed into its own wiggle.
        range: function (u, min, max) {
          var top = max > 0 ? max * 1.1 : 1;
          return [Math.min(0, min), top];
        },
      },
    },
    axes: [{}, { label: chart.unit, size: 56 }],
    hooks: {
      draw: [
        function () {
          state.root.setAttribute('data-points', String(state.points));
        },
      ],
    },
  };
}

function el(tag, className, text) {
  var node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** The chart's root: its title, its unit, a note for "no data yet", and the body uPlot draws in. */
function createRoot(chart) {
  var root = el('div', 'paced-chart');
  root.setAttribute('data-chart-id', chart.id);
  root.appendChild(el('div', 'paced-chart-title'));
  root.appendChild(el('div', 'paced-chart-unit'));
  var note = el('div', 'paced-chart-empty', 'no data yet');
  note.hidden = true;
  root.appendChild(note);
  root.appendChild(el('div', 'paced-chart-body'));
  return root;
}

function destroyPlot(root) {
  var state = states.get(root);
  if (state && state.plot) state.plot.destroy();
  states.delete(root);
}

/** Draws `chart` into `root`: new values into the uPlot already there when the shape is the same, else a new one. */
function draw(root, chart) {
  checkSpec(chart);
  root.querySelector('.paced-chart-title').textContent = chart.title;
  root.querySelector('.paced-chart-unit').textContent = chart.unit;
  var note = root.querySelector('.paced-chart-empty');
  var body = root.querySelector('.paced-chart-body');
  var points = pointsOf(chart);
  if (chart.x.length === 0 || points === 0) {
    destroyPlot(root);
    note.hidden = false;
    root.setAttribute('data-points', '0');
    return;
  }
  note.hidden = true;
  var state = states.get(root);
  var shape = shapeOf(chart);
  if (state && state.shape === shape) {
    state.points = points;
    state.plot.setData(dataOf(chart));
    return;
  }
  destroyPlot(root);
  state = { root: root, shape: shape, points: points, plot: null };
  states.set(root, state);
  var UPlot = uPlotOrThrow();
  state.plot = new UPlot(optionsOf(chart, body, state), dataOf(chart), body);
}

function rootsOf(container) {
  var roots = {};
  Array.prototype.forEach.call(container.querySelectorAll('[data-chart-id]'), function (root) {
    roots[root.getAttribute('data-chart-id')] = root;
  });
  return roots;
}

/** Draws `charts` in `container`, replacing whatever it held. */
function render(container, charts) {
  Array.prototype.forEach.call(container.querySelectorAll('[data-chart-id]'), destroyPlot);
  container.textContent = '';
  update(container, charts);
}

/**
 * Brings `container` to `charts` in place: a chart already drawn keeps its element and its uPlot (new data only),
 * a new one is added, one no longer listed is removed; the order follows `charts`.
 */
function update(container, charts) {
  if (!Array.isArray(charts)) throw new Error('PacedCharts: charts must be an array of ChartSpec');
  container.classList.add('paced-charts');
  var roots = rootsOf(container);
  var keep = {};
  charts.forEach(function (chart) {
    var root = roots[chart.id] || createRoot(chart);
    keep[chart.id] = true;
    // Appending moves an existing root into its place in the order, and places a new one before it is drawn, so
    // uPlot measures it at its real width.
    container.appendChild(root);
    draw(root, chart);
  });
  Object.keys(roots).forEach(function (id) {
    if (keep[id]) return;
    destroyPlot(roots[id]);
    container.removeChild(roots[id]);
  });
}

/** Follows the page's width. */
function resizeAll() {
  Array.prototype.forEach.call(document.querySelectorAll('[data-chart-id]'), function (root) {
    var state = states.get(root);
    if (state && state.plot)
      state.plot.setSize({ width: widthOf(root.querySelector('.paced-chart-body')), height: HEIGHT });
  });
}

var resizeTimer = null;
window.addEventListener('resize', function () {
  if (resizeTimer !== null) clearTimeout(resizeTimer);
  resizeTimer = setTimeout(function () {
    resizeTimer = null;
    resizeAll();
  }, 100);
});

window.PacedCharts = { render: render, update: update };
