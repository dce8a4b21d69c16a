// Small typed builders for Loom's dashboards. Every object they return is
// checked by tsc against @grafana/schema 10.4 (the Dashboard, Panel and
// per-panel Options/FieldConfig types Grafana 10.4 itself is built from).
import {
  BarGaugeDisplayMode,
  BarGaugeNamePlacement,
  BarGaugeSizing,
  BarGaugeValueMode,
  BigValueColorMode,
  BigValueGraphMode,
  BigValueJustifyMode,
  BigValueTextMode,
  FieldColorModeId,
  GraphDrawStyle,
  LegendDisplayMode,
  MappingType,
  SortOrder,
  StackingMode,
  ThresholdsMode,
  TooltipDisplayMode,
  VariableRefresh,
  VariableSort,
  VisibilityMode,
  VizOrientation,
} from '@grafana/schema';
import type {
  Dashboard,
  DataSourceRef,
  DataTransformerConfig,
  FieldConfigSource,
  Panel,
  RowPanel,
  ThresholdsConfig,
  ValueMapping,
  VariableModel,
} from '@grafana/schema';
import type { PrometheusDataQuery } from '@grafana/schema/dist/esm/raw/composable/prometheus/dataquery/x/PrometheusDataQuery_types.gen';
import type * as TimeSeries from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';
import type * as Stat from '@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen';
import type * as Table from '@grafana/schema/dist/esm/raw/composable/table/panelcfg/x/TablePanelCfg_types.gen';
import type * as BarGauge from '@grafana/schema/dist/esm/raw/composable/bargauge/panelcfg/x/BarGaugePanelCfg_types.gen';
import type * as Heatmap from '@grafana/schema/dist/esm/raw/composable/heatmap/panelcfg/x/HeatmapPanelCfg_types.gen';
import type * as StateTimeline from '@grafana/schema/dist/esm/raw/composable/statetimeline/panelcfg/x/StateTimelinePanelCfg_types.gen';

/** Grafana release the dashboards are written for, and its dashboard schema version. */
export const GRAFANA_VERSION = '10.4';
export const SCHEMA_VERSION = 39;

/** The datasource every panel uses: provisioned by provisioning/datasources/prometheus.yml. */
export const DATASOURCE_UID = 'loom-prometheus';
export const DS: DataSourceRef = { type: 'prometheus', uid: DATASOURCE_UID };

/** A PromQL target; the refId is assigned by the panel builder. */
export interface Query {
  expr: string;
  legend?: string;
  /** Evaluate at the end of the range only (tables, bar gauges, stats of "now"). */
  instant?: boolean;
  format?: 'time_series' | 'table';
}

export function q(expr: string, legend?: string, extra: Partial<Query> = {}): Query {
  return { expr, legend, ...extra };
}

function targets(qs: Query[], instantDefault: boolean): PrometheusDataQuery[] {
  return qs.map((x, i) => {
    const instant = x.instant ?? instantDefault;
    const t: PrometheusDataQuery = {
      refId: String.fromCharCode(65 + i),
      datasource: DS,
      expr: x.expr,
      instant,
      range: !instant,
      format: x.format ?? (instant ? 'table' : 'time_series'),
      legendFormat: x.legend ?? '__auto',
    };
    return t;
  });
}

// Panel targets are Record<string, unknown> in the Dashboard schema; the
// PrometheusDataQuery type above is what checks them.
function asTargets(t: PrometheusDataQuery[]): Array<Record<string, unknown>> {
  return t.map((x) => ({ ...x }));
}

const green = 'green';
export function thresholds(...steps: Array<[number, string]>): ThresholdsConfig {
  return {
    mode: ThresholdsMode.Absolute,
    steps: [{ color: green, value: null }, ...steps.map(([value, color]) => ({ value, color }))],
  };
}
/** Utilization colours: amber from 70 %, red from 90 %. */
export const UTIL_THRESHOLDS = thresholds([0.7, 'orange'], [0.9, 'red']);

export interface Common {
  title: string;
  description: string;
  w: number;
  h: number;
  unit?: string;
  min?: number;
  max?: number;
  thresholds?: ThresholdsConfig;
  mappings?: ValueMapping[];
  /** Shown instead of "No data" (e.g. "0" when a family only has series for problems). */
  noValue?: string;
  transformations?: DataTransformerConfig[];
  /** Per-query unit overrides (refId -> unit), for panels mixing units. */
  unitByQuery?: Record<string, string>;
}

/** A panel before it is laid out (gridPos and id come from the Layout). */
export type Unplaced = Omit<Panel, 'gridPos' | 'id'> & { w: number; h: number };

function fieldConfig<T extends Record<string, unknown>>(c: Common, custom: T, colorMode?: FieldColorModeId): FieldConfigSource<T> {
  return {
    defaults: {
      unit: c.unit,
      min: c.min,
      max: c.max,
      noValue: c.noValue,
      thresholds: c.thresholds ?? thresholds(),
      mappings: c.mappings ?? [],
      color: { mode: colorMode ?? (c.thresholds ? FieldColorModeId.Thresholds : FieldColorModeId.PaletteClassic) },
      custom,
    },
    overrides: Object.entries(c.unitByQuery ?? {}).map(([refId, unit]) => ({
      matcher: { id: 'byFrameRefID', options: refId },
      properties: [{ id: 'unit', value: unit }],
    })),
  };
}

function base(c: Common, type: string, t: PrometheusDataQuery[]): Omit<Unplaced, 'options' | 'fieldConfig'> {
  return {
    type,
    title: c.title,
    description: c.description,
    datasource: DS,
    targets: asTargets(t),
    transformations: c.transformations ?? [],
    w: c.w,
    h: c.h,
  };
}

export function timeseries(c: Common & { stack?: boolean; bars?: boolean }, qs: Query[]): Unplaced {
  const options: TimeSeries.Options = {
    legend: { calcs: ['lastNotNull', 'max'], displayMode: LegendDisplayMode.Table, placement: 'right', showLegend: true },
    tooltip: { mode: TooltipDisplayMode.Multi, sort: SortOrder.Descending },
  };
  const custom: TimeSeries.FieldConfig = {
    drawStyle: c.bars ? GraphDrawStyle.Bars : GraphDrawStyle.Line,
    lineWidth: 1,
    fillOpacity: c.stack ? 40 : 10,
    showPoints: VisibilityMode.Never,
    spanNulls: false,
    stacking: { mode: c.stack ? StackingMode.Normal : StackingMode.None, group: 'A' },
  };
  return { ...base(c, 'timeseries', targets(qs, false)), options: { ...options }, fieldConfig: fieldConfig(c, { ...custom }) };
}

export function stat(c: Common & { textMode?: BigValueTextMode; graph?: boolean }, qs: Query[]): Unplaced {
  const options: Stat.Options = {
    colorMode: BigValueColorMode.Value,
    graphMode: c.graph ? BigValueGraphMode.Area : BigValueGraphMode.None,
    justifyMode: BigValueJustifyMode.Auto,
    textMode: c.textMode ?? BigValueTextMode.Auto,
    showPercentChange: false,
    wideLayout: true,
    orientation: VizOrientation.Auto,
    reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
  };
  // Stats show "now" but keep a sparkline when asked (range query).
  return { ...base(c, 'stat', targets(qs, !c.graph)), options: { ...options }, fieldConfig: fieldConfig(c, {}) };
}

export function bargauge(c: Common, qs: Query[]): Unplaced {
  const options: BarGauge.Options = {
    displayMode: BarGaugeDisplayMode.Gradient,
    valueMode: BarGaugeValueMode.Color,
    namePlacement: BarGaugeNamePlacement.Top,
    showUnfilled: true,
    sizing: BarGaugeSizing.Auto,
    minVizHeight: 16,
    minVizWidth: 8,
    maxVizHeight: 300,
    orientation: VizOrientation.Horizontal,
    reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
  };
  return { ...base(c, 'bargauge', targets(qs, true)), options: { ...options }, fieldConfig: fieldConfig(c, {}) };
}

export function table(c: Common & { sortBy?: string; desc?: boolean; colorCells?: boolean }, qs: Query[]): Unplaced {
  const options: Table.Options = {
    showHeader: true,
    frameIndex: 0,
    cellHeight: undefined,
    sortBy: c.sortBy ? [{ displayName: c.sortBy, desc: c.desc ?? true }] : [],
  };
  const custom: Table.FieldConfig = {
    align: 'auto',
    cellOptions: c.colorCells ? { type: 'color-background' } as Table.FieldConfig['cellOptions'] : { type: 'auto' } as Table.FieldConfig['cellOptions'],
    inspect: false,
  };
  return { ...base(c, 'table', targets(qs, true)), options: { ...options }, fieldConfig: fieldConfig(c, { ...custom }) };
}

export function heatmap(c: Common, qs: Query[]): Unplaced {
  const options: Heatmap.Options = {
    calculate: true,
    calculation: { yBuckets: { value: '10' } } as Heatmap.Options['calculation'],
    color: { exponent: 0.5, fill: 'dark-orange', reverse: false, scheme: 'Oranges', steps: 64 },
    exemplars: { color: 'rgba(255,0,255,0.7)' },
    legend: { show: true },
    showValue: VisibilityMode.Auto,
    tooltip: { mode: TooltipDisplayMode.Single, yHistogram: true },
    yAxis: { unit: c.unit, min: c.min, max: c.max },
    cellGap: 1,
  };
  return { ...base(c, 'heatmap', targets(qs, false)), options: { ...options }, fieldConfig: fieldConfig(c, {}) };
}

export function stateTimeline(c: Common, qs: Query[]): Unplaced {
  const options: StateTimeline.Options = {
    legend: { calcs: [], displayMode: LegendDisplayMode.List, placement: 'bottom', showLegend: true },
    tooltip: { mode: TooltipDisplayMode.Single, sort: SortOrder.None },
    mergeValues: true,
    rowHeight: 0.9,
    showValue: VisibilityMode.Never,
  };
  const custom: StateTimeline.FieldConfig = { fillOpacity: 80, lineWidth: 0 };
  return { ...base(c, 'state-timeline', targets(qs, false)), options: { ...options }, fieldConfig: fieldConfig(c, { ...custom }) };
}

/** Value mappings for a 0/1 gauge. */
export function boolMap(one: string, zero: string, oneColor = 'green', zeroColor = 'red'): ValueMapping[] {
  return [
    {
      type: MappingType.ValueToText,
      options: { '1': { text: one, color: oneColor, index: 0 }, '0': { text: zero, color: zeroColor, index: 1 } },
    },
  ];
}

/** Lays panels out left to right in rows of 24 columns, with collapsible-free row headers. */
export class Layout {
  private panels: Array<Panel | RowPanel> = [];
  private x = 0;
  private y = 0;
  private rowH = 0;
  private id = 1;

  row(title: string): this {
    this.newline();
    const r: RowPanel = { type: 'row', title, id: this.id++, collapsed: false, panels: [], gridPos: { x: 0, y: this.y, w: 24, h: 1 } };
    this.panels.push(r);
    this.y += 1;
    return this;
  }

  add(...ps: Unplaced[]): this {
    for (const p of ps) {
      if (this.x + p.w > 24) this.newline();
      const { w, h, ...rest } = p;
      const placed: Panel = { ...rest, id: this.id++, gridPos: { x: this.x, y: this.y, w, h } };
      this.panels.push(placed);
      this.x += w;
      this.rowH = Math.max(this.rowH, h);
    }
    return this;
  }

  private newline(): void {
    if (this.x > 0) {
      this.y += this.rowH;
      this.x = 0;
      this.rowH = 0;
    }
  }

  build(): Array<Panel | RowPanel> {
    return this.panels;
  }
}

/** A query variable over label values (Prometheus datasource's label_values()). */
export function labelVariable(name: string, label: string, query: string, description: string): VariableModel {
  return {
    type: 'query',
    name,
    label,
    description,
    datasource: DS,
    query: { query, refId: 'PrometheusVariableQueryEditor-VariableQuery' },
    refresh: VariableRefresh.onTimeRangeChanged,
    includeAll: true,
    multi: true,
    allValue: '.*',
    current: { text: 'All', value: '$__all' },
    sort: VariableSort.alphabeticalAsc,
  };
}

export interface DashboardSpec {
  uid: string;
  title: string;
  description: string;
  tags: string[];
  panels: Array<Panel | RowPanel>;
  variables?: VariableModel[];
  time?: string;
}

/** The dashboard: schema 39 (Grafana 10.4), the provisioned datasource, 30 s refresh. */
export function dashboard(s: DashboardSpec): Dashboard {
  return {
    uid: s.uid,
    title: s.title,
    description: s.description,
    tags: ['loom', ...s.tags],
    schemaVersion: SCHEMA_VERSION,
    version: 1,
    editable: true,
    graphTooltip: 1,
    refresh: '30s',
    time: { from: s.time ?? 'now-1h', to: 'now' },
    timezone: 'browser',
    fiscalYearStartMonth: 0,
    liveNow: false,
    links: [
      {
        title: 'Loom dashboards',
        type: 'dashboards',
        tags: ['loom'],
        asDropdown: true,
        icon: 'external link',
        includeVars: false,
        keepTime: true,
        targetBlank: false,
        tooltip: '',
      },
    ],
    annotations: {
      list: [
        {
          builtIn: 1,
          datasource: { type: 'grafana', uid: '-- Grafana --' },
          enable: true,
          hide: true,
          iconColor: 'rgba(0, 211, 255, 1)',
          name: 'Annotations & Alerts',
          type: 'dashboard',
        },
      ],
    },
    templating: { list: s.variables ?? [] },
    panels: s.panels,
  };
}
