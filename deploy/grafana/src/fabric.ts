// Fabric overview: utilization leaf x spine, hot links, ECN/CNP/PFC, links out
// of placement, drains, sync status, the placement's prediction.
import { BigValueTextMode, MappingType } from '@grafana/schema';
import type { Dashboard } from '@grafana/schema';
import { Layout, UTIL_THRESHOLDS, bargauge, boolMap, dashboard, q, stat, table, thresholds, timeseries, heatmap } from './lib';

// Link ids are "<lower device>:<port>--<upper device>:<port>" (leaf first on a
// two-tier fabric). These two label_replace calls give each series `leaf` and
// `spine` labels; on a three-tier fabric the rows are the lower tier of each
// link and the columns the upper one.
function leafSpine(expr: string): string {
  return `label_replace(label_replace(${expr}, "leaf", "$1", "link", "([^:]+):.*"), "spine", "$1", "link", ".*--([^:]+):.*")`;
}

export function fabricDashboard(): Dashboard {
  const l = new Layout();

  l.row('Fabric now');
  l.add(
    stat(
      { title: 'Links by state', w: 6, h: 4, description: 'Switch-to-switch and NIC links by telemetry state (loom_links). stale = no fresh counters: never acted on.', noValue: '0' },
      [q('sum by (state) (loom_links)', '{{state}}')],
    ),
    stat(
      { title: 'Worst link utilization (measured)', w: 3, h: 4, unit: 'percentunit', thresholds: UTIL_THRESHOLDS, description: 'loom_fabric_max_link_utilization: the busiest fresh switch-to-switch direction.', graph: true },
      [q('loom_fabric_max_link_utilization', 'measured')],
    ),
    stat(
      { title: 'Placement predicted max utilization', w: 3, h: 4, unit: 'percentunit', thresholds: thresholds([0.9, 'orange'], [1, 'red']), description: 'loom_placement_max_utilization: the worst link the current placement predicts; above 100 % the jobs do not fit.', graph: true },
      [q('loom_placement_max_utilization', 'predicted')],
    ),
    stat(
      { title: 'Drained links', w: 3, h: 4, thresholds: thresholds([1, 'blue']), description: 'loom_links_drained: links an operator took out of service.' },
      [q('loom_links_drained', 'drained')],
    ),
    stat(
      { title: 'Links out of placement', w: 3, h: 4, thresholds: thresholds([1, 'orange']), noValue: '0', description: 'Links Loom keeps out of placement (any cause), from loom_link_out_of_placement; no series = none.' },
      [q('sum(loom_link_out_of_placement)', 'out')],
    ),
    stat(
      { title: 'PFC-paused fabric directions', w: 3, h: 4, thresholds: thresholds([1, 'red']), description: 'loom_pfc_paused_fabric_directions: switch-to-switch directions paused >= 5 % of the time (pauses spreading past the edge).' },
      [q('loom_pfc_paused_fabric_directions', 'paused')],
    ),
  );

  l.row('Utilization');
  l.add(
    table(
      {
        title: 'Utilization leaf x spine (worst direction, now)',
        w: 12,
        h: 10,
        unit: 'percentunit',
        min: 0,
        max: 1,
        thresholds: UTIL_THRESHOLDS,
        colorCells: true,
        description:
          'Each cell is the worst direction of the links between a leaf (row) and a spine (column), from loom_link_utilization with label_replace on the link id. Several parallel links between the same pair show the worst.',
        transformations: [
          { id: 'groupingToMatrix', options: { columnField: 'spine', rowField: 'leaf', valueField: 'Value', emptyValue: 'null' } },
        ],
      },
      [q(`max by (leaf, spine) (${leafSpine('loom_link_utilization')})`, '', { instant: true, format: 'table' })],
    ),
    heatmap(
      {
        title: 'Utilization distribution over time (all switch-to-switch directions)',
        w: 12,
        h: 10,
        unit: 'percentunit',
        min: 0,
        max: 1,
        description: 'How many link directions sit at each utilization, over time (loom_link_utilization bucketed by Grafana). A band near 100 % is hot links; a split band is imbalance.',
      },
      [q('loom_link_utilization', '{{link}} {{direction}}')],
    ),
  );
  l.add(
    bargauge(
      { title: 'Top 10 hot link directions (now)', w: 8, h: 10, unit: 'percentunit', min: 0, max: 1, thresholds: UTIL_THRESHOLDS, description: 'topk(10) of loom_link_utilization.' },
      [q('topk(10, loom_link_utilization)', '{{link}} {{direction}}')],
    ),
    timeseries(
      { title: 'Top 10 hot link directions over time', w: 16, h: 10, unit: 'percentunit', min: 0, thresholds: UTIL_THRESHOLDS, description: 'The 10 busiest directions at each step (topk of loom_link_utilization), with the placement prediction and the measured worst for reference.' },
      [
        q('topk(10, loom_link_utilization)', '{{link}} {{direction}}'),
        q('loom_placement_max_utilization', 'placement predicted max'),
      ],
    ),
  );

  l.row('Congestion: ECN, CNP, PFC');
  l.add(
    timeseries(
      { title: 'Fabric ECN-marked and CNP packets/s', w: 12, h: 8, unit: 'pps', description: 'loom_fabric_ecn_marked_pps (switches marking) and loom_fabric_cnp_pps (NICs answering with congestion notifications), summed over every fresh direction.' },
      [q('loom_fabric_ecn_marked_pps', 'ECN marked'), q('loom_fabric_cnp_pps', 'CNP')],
    ),
    timeseries(
      { title: 'PFC pause ratio, top 10 directions', w: 12, h: 8, unit: 'percentunit', min: 0, thresholds: thresholds([0.05, 'orange'], [0.2, 'red']), description: 'Share of time paused by PFC (loom_link_pfc_pause_ratio, the K highest directions Loom exports), with the fabric directions paused >= 5 %.', noValue: '0' },
      [q('topk(10, loom_link_pfc_pause_ratio)', '{{link}} {{direction}}')],
    ),
  );
  l.add(
    bargauge(
      { title: 'Top 10 ECN-marking directions (now)', w: 8, h: 9, unit: 'pps', description: 'topk(10) of loom_link_ecn_marked_pps.' },
      [q('topk(10, loom_link_ecn_marked_pps)', '{{link}} {{direction}}')],
    ),
    bargauge(
      { title: 'Top 10 CNP directions (now)', w: 8, h: 9, unit: 'pps', description: 'topk(10) of loom_link_cnp_pps (NIC links).' },
      [q('topk(10, loom_link_cnp_pps)', '{{link}} {{direction}}')],
    ),
    table(
      {
        title: 'PFC storm origins',
        w: 8,
        h: 9,
        noValue: 'no storm',
        description: 'loom_pfc_storm_origin: NIC ports Loom found SENDING a PFC storm (the origin, not its victims); quarantined = its leaf port was shut.',
        transformations: [{ id: 'organize', options: { excludeByName: { Time: true, __name__: true, instance: true, job: true }, renameByName: { Value: 'storming' } } }],
      },
      [q('max by (port, quarantined) (loom_pfc_storm_origin)', '', { instant: true, format: 'table' })],
    ),
  );
  l.add(
    timeseries(
      { title: 'PFC-paused fabric directions and storming ports', w: 24, h: 7, description: 'Pause propagation: loom_pfc_paused_fabric_directions, and the number of storming NIC ports (count of loom_pfc_storm_origin).', noValue: '0' },
      [q('loom_pfc_paused_fabric_directions', 'fabric directions paused >= 5%'), q('count(loom_pfc_storm_origin)', 'storming NIC ports')],
    ),
  );

  l.row('Links out of placement and drains');
  l.add(
    timeseries(
      { title: 'Links out of placement by cause', w: 12, h: 8, stack: true, noValue: '0', description: 'sum by cause of loom_link_out_of_placement: oper_down, flapping, errors, capacity_loss, lldp_mismatch, drained, other.' },
      [q('sum by (cause) (loom_link_out_of_placement)', '{{cause}}')],
    ),
    table(
      {
        title: 'Links out of placement (now)',
        w: 12,
        h: 8,
        noValue: 'none',
        description: 'Every link Loom keeps out of placement and why (loom_link_out_of_placement).',
        transformations: [{ id: 'organize', options: { excludeByName: { Time: true, Value: true, __name__: true, instance: true, job: true } } }],
      },
      [q('loom_link_out_of_placement', '', { instant: true, format: 'table' })],
    ),
  );
  l.add(
    table(
      {
        title: 'Drained links and for how long',
        w: 12,
        h: 8,
        unit: 's',
        noValue: 'none',
        sortBy: 'drained for',
        thresholds: thresholds([86400, 'orange'], [7 * 86400, 'red']),
        description: 'loom_link_drained_seconds per drained link.',
        transformations: [{ id: 'organize', options: { excludeByName: { Time: true, __name__: true, instance: true, job: true }, renameByName: { Value: 'drained for' } } }],
      },
      [q('loom_link_drained_seconds', '', { instant: true, format: 'table' })],
    ),
    timeseries(
      { title: 'Links by telemetry state', w: 12, h: 8, description: 'loom_links by state, and drained links (loom_links_drained).' },
      [q('sum by (state) (loom_links)', '{{state}}'), q('loom_links_drained', 'drained')],
    ),
  );

  l.row('Sync status');
  l.add(
    stat(
      {
        title: 'Reconciler mode',
        w: 4,
        h: 4,
        textMode: BigValueTextMode.Name,
        description: 'The mode in force (loom_reconciler_mode == 1): active programs the fabric, shadow computes only, approve waits for loomctl apply. Sync alerts are silenced in shadow mode.',
      },
      [q('loom_reconciler_mode == 1', '{{mode}}')],
    ),
    stat(
      { title: 'Devices by sync state', w: 8, h: 4, description: 'loom_devices_sync: programmed devices in_sync / out_of_sync / failing.', mappings: [] },
      [q('sum by (state) (loom_devices_sync)', '{{state}}')],
    ),
    stat(
      { title: 'BGP sessions established', w: 6, h: 4, noValue: 'no BGP sessions', description: 'Established / configured BGP-DPF sessions (loom_bgp_session_up). No series when Loom programs no device over BGP (e.g. the embedded emulator).' },
      [q('sum(loom_bgp_session_up)', 'up'), q('count(loom_bgp_session_up)', 'configured')],
    ),
    stat(
      { title: 'Devices out of sync', w: 6, h: 4, thresholds: thresholds([1, 'red']), description: 'Programmed devices whose applied state differs from the desired one: sum of 1 - loom_device_in_sync.' },
      [q('sum(1 - loom_device_in_sync)', 'out of sync')],
    ),
  );
  l.add(
    table(
      {
        title: 'Per-device sync',
        w: 12,
        h: 9,
        sortBy: 'in sync',
        desc: false,
        colorCells: true,
        mappings: boolMap('in sync', 'OUT OF SYNC'),
        description: 'loom_device_in_sync per programmed device, out-of-sync first.',
        transformations: [{ id: 'organize', options: { excludeByName: { Time: true, __name__: true, instance: true, job: true }, renameByName: { Value: 'in sync' } } }],
      },
      [q('loom_device_in_sync', '', { instant: true, format: 'table' })],
    ),
    table(
      {
        title: 'BGP sessions',
        w: 12,
        h: 9,
        sortBy: 'up',
        desc: false,
        colorCells: true,
        noValue: 'no BGP sessions',
        mappings: [
          { type: MappingType.ValueToText, options: { '1': { text: 'Established', color: 'green', index: 0 }, '0': { text: 'DOWN', color: 'red', index: 1 } } },
        ],
        description: 'loom_bgp_session_up per session (down first) and how often it left Established (loom_bgp_session_flaps).',
        transformations: [
          { id: 'merge', options: {} },
          { id: 'organize', options: { excludeByName: { Time: true, __name__: true, instance: true, job: true }, renameByName: { 'Value #A': 'up', 'Value #B': 'flaps' } } },
        ],
      },
      [
        q('loom_bgp_session_up', '', { instant: true, format: 'table' }),
        q('loom_bgp_session_flaps', '', { instant: true, format: 'table' }),
      ],
    ),
  );

  return dashboard({
    uid: 'loom-fabric-overview',
    title: 'Loom / Fabric overview',
    description: 'Utilization leaf x spine, hot links, ECN/CNP/PFC, links out of placement, drains and sync status of the fabric Loom controls.',
    tags: ['fabric'],
    panels: l.build(),
    time: 'now-1h',
  });
}
