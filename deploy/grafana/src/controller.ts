// Controller health: API, placement, store, events and watches, telemetry
// ingest and staleness, southbound, process.
import type { Dashboard } from '@grafana/schema';
import { Layout, bargauge, boolMap, dashboard, q, stat, table, thresholds, timeseries } from './lib';

const RI = '[$__rate_interval]';
// Watch streams' durations are their lifetimes: left out of latency quantiles.
const UNARY = 'method!~".*/Watch.*"';

export function controllerDashboard(): Dashboard {
  const l = new Layout();

  l.row('loomd');
  l.add(
    stat({ title: 'Ready', w: 3, h: 4, mappings: boolMap('READY', 'NOT READY'), thresholds: thresholds([1, 'green']), description: 'loom_ready: 1 once state is recovered and the API serves.' }, [q('loom_ready', 'ready')]),
    stat({ title: 'Uptime', w: 3, h: 4, unit: 's', description: 'time() - process_start_time_seconds.' }, [q('time() - process_start_time_seconds', 'uptime')]),
    stat({ title: 'Resident memory', w: 3, h: 4, unit: 'bytes', graph: true, description: 'process_resident_memory_bytes.' }, [q('process_resident_memory_bytes', 'RSS')]),
    stat({ title: 'CPU (cores)', w: 3, h: 4, unit: 'short', graph: true, description: 'rate of process_cpu_seconds_total.' }, [q(`rate(process_cpu_seconds_total${RI})`, 'CPU')]),
    table(
      {
        title: 'Build',
        w: 12,
        h: 4,
        description: 'loom_build_info.',
        transformations: [{ id: 'organize', options: { excludeByName: { Time: true, Value: true, __name__: true } } }],
      },
      [q('loom_build_info', '', { instant: true, format: 'table' })],
    ),
  );

  l.row('API (gRPC)');
  l.add(
    timeseries(
      { title: 'Requests/s by method', w: 8, h: 8, unit: 'reqps', description: 'rate of loom_grpc_requests_total by method.' },
      [q(`sum by (method) (rate(loom_grpc_requests_total${RI}))`, '{{method}}')],
    ),
    timeseries(
      { title: 'Errors/s by method and code', w: 8, h: 8, unit: 'reqps', noValue: '0', description: 'rate of loom_grpc_requests_total with a code other than OK (NOT_FOUND and INVALID_ARGUMENT are usually the client\'s; UNAVAILABLE, INTERNAL, DEADLINE_EXCEEDED are Loom\'s).' },
      [q(`sum by (method, code) (rate(loom_grpc_requests_total{code!="OK"}${RI}))`, '{{method}} {{code}}')],
    ),
    timeseries(
      { title: 'Latency p99 by method (unary)', w: 8, h: 8, unit: 's', description: 'histogram_quantile(0.99) of loom_grpc_request_duration_seconds per method; watch streams (whose duration is their lifetime) left out.' },
      [q(`histogram_quantile(0.99, sum by (method, le) (rate(loom_grpc_request_duration_seconds_bucket{${UNARY}}${RI})))`, '{{method}}')],
    ),
  );
  l.add(
    table(
      {
        title: 'Error ratio by method (time range)',
        w: 12,
        h: 7,
        unit: 'percentunit',
        noValue: 'no errors',
        sortBy: 'error ratio',
        description: 'Share of requests per method that did not end OK over the dashboard range.',
        thresholds: thresholds([0.01, 'orange'], [0.05, 'red']),
        transformations: [{ id: 'organize', options: { excludeByName: { Time: true }, renameByName: { Value: 'error ratio' } } }],
      },
      [
        q(
          'sum by (method) (increase(loom_grpc_requests_total{code!="OK"}[$__range])) / sum by (method) (increase(loom_grpc_requests_total[$__range]))',
          '',
          { instant: true, format: 'table' },
        ),
      ],
    ),
    timeseries(
      { title: 'Latency p50 / p99, all unary methods', w: 12, h: 7, unit: 's', description: 'Quantiles of loom_grpc_request_duration_seconds over every unary method.' },
      [
        q(`histogram_quantile(0.5, sum by (le) (rate(loom_grpc_request_duration_seconds_bucket{${UNARY}}${RI})))`, 'p50'),
        q(`histogram_quantile(0.99, sum by (le) (rate(loom_grpc_request_duration_seconds_bucket{${UNARY}}${RI})))`, 'p99'),
      ],
    ),
  );

  l.row('Placement, store, events, watches');
  l.add(
    timeseries(
      { title: 'Placement time p50 / p99', w: 6, h: 8, unit: 's', description: 'loom_placement_seconds quantiles (placement computations: incremental and full recomputes).' },
      [
        q(`histogram_quantile(0.5, sum by (le) (rate(loom_placement_seconds_bucket${RI})))`, 'p50'),
        q(`histogram_quantile(0.99, sum by (le) (rate(loom_placement_seconds_bucket${RI})))`, 'p99'),
      ],
    ),
    timeseries(
      { title: 'Placements/s and assignment changes/s', w: 6, h: 8, unit: 'ops', description: 'rate of loom_placement_seconds_count and loom_assignment_changes_total.' },
      [q(`rate(loom_placement_seconds_count${RI})`, 'placements'), q(`rate(loom_assignment_changes_total${RI})`, 'assignment changes')],
    ),
    timeseries(
      { title: 'Store write latency p50 / p99', w: 6, h: 8, unit: 's', description: 'loom_store_write_seconds: durable (SQLite WAL) commit latency.' },
      [
        q(`histogram_quantile(0.5, sum by (le) (rate(loom_store_write_seconds_bucket${RI})))`, 'p50'),
        q(`histogram_quantile(0.99, sum by (le) (rate(loom_store_write_seconds_bucket${RI})))`, 'p99'),
      ],
    ),
    timeseries(
      { title: 'Store writes/s and errors/s', w: 6, h: 8, unit: 'ops', description: 'Commits (loom_store_write_seconds_count) and failed commits (loom_store_errors_total: the change was not applied).' },
      [q(`rate(loom_store_write_seconds_count${RI})`, 'writes'), q(`rate(loom_store_errors_total${RI})`, 'errors')],
    ),
  );
  l.add(
    timeseries(
      { title: 'Events/s by type', w: 8, h: 8, stack: true, description: 'rate of loom_events_total by type, and events removed by retention (loom_events_compacted_total).' },
      [q(`sum by (type) (rate(loom_events_total${RI}))`, '{{type}}'), q(`rate(loom_events_compacted_total${RI})`, 'compacted')],
    ),
    timeseries(
      { title: 'Event history', w: 8, h: 8, unit: 'bytes', unitByQuery: { B: 'short' }, description: 'loom_event_history_memory_bytes (event history in memory, bytes) and loom_event_history_retained (events kept in the store).' },
      [q('loom_event_history_memory_bytes', 'memory'), q('loom_event_history_retained', 'retained events')],
    ),
    timeseries(
      { title: 'Watchers and watch catch-ups / cuts', w: 8, h: 8, description: 'Open watch streams (loom_watchers) and per-minute slow watchers caught up, cut, or behind the retained history (loom_watch_*_total).' },
      [
        q('loom_watchers', 'open watchers'),
        q(`60 * rate(loom_watch_catchups_total${RI})`, 'catch-ups/min'),
        q(`60 * rate(loom_watch_cuts_total${RI})`, 'cuts/min'),
        q(`60 * rate(loom_watch_compacted_total${RI})`, 'behind history/min'),
      ],
    ),
  );

  l.row('Telemetry');
  l.add(
    timeseries(
      { title: 'Ingest: notifications/s and updates/s', w: 8, h: 8, unit: 'ops', description: 'loom_telemetry_ingest_total{kind=notifications|updates}.' },
      [q(`sum by (kind) (rate(loom_telemetry_ingest_total{kind=~"notifications|updates"}${RI}))`, '{{kind}}')],
    ),
    timeseries(
      { title: 'Ingest rejects/s by reason, counter resets/s', w: 8, h: 8, unit: 'ops', description: 'loom_telemetry_ingest_total for every other kind: unknown_target, unknown_path, bad_value, missing_timestamp, future_timestamp, foreign_target, counter_resets.' },
      [q(`sum by (kind) (rate(loom_telemetry_ingest_total{kind!~"notifications|updates"}${RI}))`, '{{kind}}')],
    ),
    timeseries(
      { title: 'Stream errors, silent cuts, subscribe rejects /min', w: 8, h: 8, description: 'loom_telemetry_stream_errors_total, loom_telemetry_silent_stream_cuts_total, loom_telemetry_subscribe_rejects_total, summed over targets.' },
      [
        q(`60 * rate(loom_telemetry_stream_errors_total${RI})`, 'stream errors'),
        q(`60 * rate(loom_telemetry_silent_stream_cuts_total${RI})`, 'silent cuts'),
        q(`60 * rate(loom_telemetry_subscribe_rejects_total${RI})`, 'subscribe rejects'),
      ],
    ),
  );
  l.add(
    stat(
      { title: 'Stale links', w: 4, h: 4, thresholds: thresholds([1, 'orange']), description: 'loom_links{state="stale"}: links without fresh counters (never acted on).' },
      [q('loom_links{state="stale"}', 'stale')],
    ),
    stat({ title: 'gNMI targets by state', w: 8, h: 4, description: 'loom_telemetry_targets: connected / synced / down.' }, [q('sum by (state) (loom_telemetry_targets)', '{{state}}')]),
    stat(
      { title: 'gNMI targets down', w: 4, h: 4, noValue: 'no targets', thresholds: thresholds([1, 'red']), description: 'Devices whose gNMI streams are not connected and synced: sum(1 - loom_telemetry_target_up). No series with the embedded emulator (it has no gNMI targets).' },
      [q('sum(1 - loom_telemetry_target_up)', 'down')],
    ),
    stat(
      { title: 'Capped families: series left out', w: 8, h: 4, noValue: '0', thresholds: thresholds([1, 'orange']), description: 'loom_metric_series_dropped: series a capped family (e.g. loom_link_utilization at 4,096) left out at its last update.' },
      [q('sum by (family) (loom_metric_series_dropped)', '{{family}}')],
    ),
  );
  l.add(
    bargauge(
      { title: 'Oldest telemetry: seconds since last notification (top 10 devices)', w: 8, h: 9, unit: 's', thresholds: thresholds([10, 'orange'], [60, 'red']), description: 'topk(10) of loom_telemetry_last_update_age_seconds (per gNMI target).' },
      [q('topk(10, loom_telemetry_last_update_age_seconds)', '{{device}}')],
    ),
    table(
      {
        title: 'gNMI targets not up',
        w: 8,
        h: 9,
        noValue: 'all up',
        colorCells: true,
        mappings: boolMap('up', 'DOWN'),
        sortBy: 'up',
        desc: false,
        description: 'loom_telemetry_target_up per device, down first (bottomk 20).',
        transformations: [{ id: 'organize', options: { excludeByName: { Time: true, __name__: true, instance: true, job: true }, renameByName: { Value: 'up' } } }],
      },
      [q('bottomk(20, loom_telemetry_target_up)', '', { instant: true, format: 'table' })],
    ),
    timeseries(
      { title: 'Telemetry signals by state', w: 8, h: 9, stack: true, description: 'loom_telemetry_signals summed over signals: device signals live / stale / unavailable / pending (`loomctl devices` names them).' },
      [q('sum by (state) (loom_telemetry_signals)', '{{state}}')],
    ),
  );

  l.row('Southbound');
  l.add(
    timeseries(
      { title: 'Devices by sync state', w: 8, h: 8, stack: true, description: 'loom_devices_sync: programmed devices in_sync / out_of_sync / failing.' },
      [q('sum by (state) (loom_devices_sync)', '{{state}}')],
    ),
    timeseries(
      { title: 'Apply failures/min by device (top 10)', w: 8, h: 8, noValue: '0', description: 'rate of loom_device_apply_failures_total, the 10 worst devices.' },
      [q(`topk(10, 60 * rate(loom_device_apply_failures_total${RI}))`, '{{device}}')],
    ),
    bargauge(
      { title: 'Devices out of sync for (top 10)', w: 8, h: 8, unit: 's', noValue: 'all in sync', thresholds: thresholds([60, 'orange'], [600, 'red']), description: 'loom_device_out_of_sync_seconds: one series per device out of sync.' },
      [q('topk(10, loom_device_out_of_sync_seconds)', '{{device}}')],
    ),
  );
  l.add(
    timeseries(
      { title: 'BGP sessions established / configured', w: 8, h: 8, noValue: 'no BGP sessions', description: 'sum and count of loom_bgp_session_up (no series without BGP programming, e.g. with the embedded emulator).' },
      [q('sum(loom_bgp_session_up)', 'established'), q('count(loom_bgp_session_up)', 'configured')],
    ),
    bargauge(
      { title: 'BGP session flaps (top 10)', w: 8, h: 8, noValue: 'no BGP sessions', thresholds: thresholds([1, 'orange'], [5, 'red']), description: 'loom_bgp_session_flaps: times the session left Established since loomd started.' },
      [q('topk(10, loom_bgp_session_flaps)', '{{device}} {{session}}')],
    ),
    stat(
      { title: 'Change plan', w: 8, h: 8, description: 'loom_change_plan: the fabric-wide change plan\'s state (1 = in force), its revision and pending devices.' },
      [q('max by (state) (loom_change_plan{state!=""}) == 1', '{{state}}'), q('loom_change_plan{field!=""}', '{{field}}')],
    ),
  );

  return dashboard({
    uid: 'loom-controller',
    title: 'Loom / Controller health',
    description: 'loomd itself: API, placement, store, events and watches, telemetry ingest and staleness, southbound sessions and sync, process.',
    tags: ['controller'],
    panels: l.build(),
    time: 'now-1h',
  });
}
