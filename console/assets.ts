// The charts' browser side as strings: uPlot (from node_modules) and console/web's renderer, read from disk once, for
// the HTML reports to inline (console/report.ts) and the console's server to serve at /assets/... No CDN, no network:
// everything the page runs ships with the project.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ChartAssets {
  /** uPlot's browser build (it defines the global `uPlot`). */
  uplotJs: string;
  uplotCss: string;
  /** console/web/charts.js: `window.PacedCharts`. */
  chartsJs: string;
  chartsCss: string;
}

export class ChartAssetsError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ChartAssetsError';
  }
}

/** Where each asset is read from. */
export function chartAssetFiles(): Record<keyof ChartAssets, string> {
  const fromUplot = (file: string) => {
    try {
      return require.resolve(`uplot/dist/${file}`);
    } catch (error) {
      throw new ChartAssetsError(
        `uplot/dist/${file} is not installed (the uplot dependency in package.json): run npm install`,
        { cause: error },
      );
    }
  };
  return {
    uplotJs: fromUplot('uPlot.iife.min.js'),
    uplotCss: fromUplot('uPlot.min.css'),
    chartsJs: join(__dirname, 'web', 'charts.js'),
    chartsCss: join(__dirname, 'web', 'charts.css'),
  };
}

let cached: ChartAssets | undefined;

/** The four assets' text, read on the first call. */
export function chartAssets(): ChartAssets {
  if (cached) return cached;
  const files = chartAssetFiles();
  const read = (key: keyof ChartAssets) => {
    try {
      return readFileSync(files[key], 'utf8');
    } catch (error) {
      throw new ChartAssetsError(`cannot read the chart asset ${files[key]}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  };
  cached = {
    uplotJs: read('uplotJs'),
    uplotCss: read('uplotCss'),
    chartsJs: read('chartsJs'),
    chartsCss: read('chartsCss'),
  };
  return cached;
}

/** The assets as the console serves them: path under the page's origin, its content type, and which asset it is. */
export const CHART_ASSET_ROUTES: Readonly<Record<string, { asset: keyof ChartAssets; contentType: string }>> = {
  '/assets/uPlot.iife.min.js': { asset: 'uplotJs', contentType: 'text/javascript; charset=utf-8' },
  '/assets/uPlot.min.css': { asset: 'uplotCss', contentType: 'text/css; charset=utf-8' },
  '/assets/charts.js': { asset: 'chartsJs', contentType: 'text/javascript; charset=utf-8' },
  '/assets/charts.css': { asset: 'chartsCss', contentType: 'text/css; charset=utf-8' },
};

/** The asset served at `path` (one of CHART_ASSET_ROUTES), or undefined for any other path. */
export function chartAsset(path: string): { contentType: string; body: string } | undefined {
  const route = Object.hasOwn(CHART_ASSET_ROUTES, path) ? CHART_ASSET_ROUTES[path] : undefined;
  return route && { contentType: route.contentType, body: chartAssets()[route.asset] };
}
