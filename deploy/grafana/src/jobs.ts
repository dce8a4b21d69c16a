// Job view, templated by tenant and job.
//
// Per-job series: loom_job_fabric_slowdown{job_id,tenant}, exported for the
// top 50 jobs by fabric slowdown and jobs labelled loom.io/metrics=true
// (`loomctl jobs why JOB_ID` answers for any job). The rest is the fabric and
// placement around them. The per-job label is `job_id`, not `job`: Prometheus
// sets `job` on every scraped series (the scrape job) and would rename a
// target's own `job` label to `exported_job`.
import type { Dashboard } from '@grafana/schema';
import { Layout, UTIL_THRESHOLDS, bargauge, dashboard, labelVariable, q, stat, table, thresholds, timeseries } from './lib';

const SEL = 'tenant=~"$tenant", job_id=~"$job"';

export function jobsDashboard(): Dashboard {
  const l = new Layout();

  l.row('Jobs and placement');
  l.add(
    stat({ title: 'Registered jobs', w: 4, h: 4, graph: true, description: 'loom_jobs: jobs registered by the schedulers.' }, [q('loom_jobs', 'jobs')]),
    stat(
      { title: 'Placement predicted max utilization', w: 4, h: 4, unit: 'percentunit', graph: true, thresholds: thresholds([0.9, 'orange'], [1, 'red']), description: 'loom_placement_max_utilization: the worst link of the placement; above 100 % some job runs slower than its NICs allow.' },
      [q('loom_placement_max_utilization', 'predicted')],
    ),
    stat(
      { title: 'Assignment changes (time range)', w: 4, h: 4, description: 'Job assignments changed by recomputes over the dashboard range (increase of loom_assignment_changes_total).' },
      [q('increase(loom_assignment_changes_total[$__range])', 'changes')],
    ),
    timeseries(
      { title: 'Job events/s by type', w: 12, h: 8, stack: true, bars: true, description: 'Job registrations, updates and releases (loom_events_total{type=~"job_.*"}).' },
      [q('sum by (type) (rate(loom_events_total{type=~"job_.*"}[$__rate_interval]))', '{{type}}')],
    ),
  );
  l.add(
    timeseries(
      { title: 'Jobs and assignment changes', w: 12, h: 8, description: 'Registered jobs (loom_jobs) and assignment changes per minute (loom_assignment_changes_total).' },
      [q('loom_jobs', 'jobs'), q('60 * rate(loom_assignment_changes_total[$__rate_interval])', 'assignment changes/min')],
    ),
  );

  l.row('What Loom did (fabric-wide)');
  l.add(
    timeseries(
      {
        title: 'Remediation and re-placement events/s',
        w: 12,
        h: 8,
        stack: true,
        bars: true,
        description: 'Events that move or protect jobs: remediation, paths recomputed, weights, ALB, DLB, link drains and oper changes, device sync (loom_events_total by type). `loomctl events` has the reasons.',
      },
      [q('sum by (type) (rate(loom_events_total{type!~"job_.*"}[$__rate_interval]))', '{{type}}')],
    ),
    table(
      {
        title: 'Events in the time range by type',
        w: 12,
        h: 8,
        sortBy: 'events',
        description: 'increase of loom_events_total by type over the dashboard range.',
        transformations: [{ id: 'organize', options: { excludeByName: { Time: true }, renameByName: { Value: 'events' } } }],
      },
      [q('sum by (type) (increase(loom_events_total[$__range]))', '', { instant: true, format: 'table' })],
    ),
  );

  l.row('Fabric the jobs run on');
  l.add(
    bargauge(
      { title: 'Worst links in the fabric (now)', w: 8, h: 9, unit: 'percentunit', min: 0, max: 1, thresholds: UTIL_THRESHOLDS, description: 'topk(10) of loom_link_utilization. Per-job worst links come with per-job series (issue 19 item 1) and `loomctl jobs get JOB` shows the job\'s paths.' },
      [q('topk(10, loom_link_utilization)', '{{link}} {{direction}}')],
    ),
    timeseries(
      { title: 'Fabric congestion: ECN marks, CNPs', w: 8, h: 9, unit: 'pps', description: 'loom_fabric_ecn_marked_pps and loom_fabric_cnp_pps.' },
      [q('loom_fabric_ecn_marked_pps', 'ECN marked'), q('loom_fabric_cnp_pps', 'CNP')],
    ),
    timeseries(
      { title: 'PFC pauses: top directions', w: 8, h: 9, unit: 'percentunit', min: 0, noValue: '0', description: 'topk(5) of loom_link_pfc_pause_ratio and the fabric directions paused >= 5 %.' },
      [q('topk(5, loom_link_pfc_pause_ratio)', '{{link}} {{direction}}'), q('loom_pfc_paused_fabric_directions', 'fabric directions paused')],
    ),
  );

  l.row('Per job: $tenant / $job (per-job series not exported yet: issue 19 item 1)');
  l.add(
    timeseries(
      {
        title: 'Fabric slowdown of $job',
        w: 12,
        h: 8,
        min: 1,
        thresholds: thresholds([1.1, 'orange'], [1.5, 'red']),
        description: 'loom_job_fabric_slowdown{tenant, job_id}: how much longer the job takes than on an idle fabric (1 = not slowed). Exported for the top-K slowed jobs and opted-in jobs once issue 19 item 1 lands; until then this panel has no data. Use `loomctl jobs get JOB` meanwhile.',
      },
      [q(`loom_job_fabric_slowdown{${SEL}}`, '{{tenant}}/{{job_id}}')],
    ),
    bargauge(
      {
        title: 'Top 10 jobs by fabric slowdown',
        w: 12,
        h: 8,
        min: 1,
        thresholds: thresholds([1.1, 'orange'], [1.5, 'red']),
        description: 'topk(10) of loom_job_fabric_slowdown within the selected tenants; no data until issue 19 item 1 lands.',
      },
      [q('topk(10, loom_job_fabric_slowdown{tenant=~"$tenant"})', '{{tenant}}/{{job_id}}')],
    ),
  );

  return dashboard({
    uid: 'loom-jobs',
    title: 'Loom / Jobs',
    description: 'Jobs, their placement and what Loom did for them; per-job fabric slowdown once loomd exports it (issue 19 item 1).',
    tags: ['jobs'],
    panels: l.build(),
    variables: [
      labelVariable('tenant', 'Tenant', 'label_values(loom_job_fabric_slowdown, tenant)', 'Tenants with per-job series (loom_job_fabric_slowdown; not exported yet).'),
      labelVariable('job', 'Job', 'label_values(loom_job_fabric_slowdown{tenant=~"$tenant"}, job_id)', 'Jobs of the selected tenants with per-job series (loom_job_fabric_slowdown; not exported yet).'),
    ],
    time: 'now-3h',
  });
}
