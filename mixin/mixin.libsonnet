// kafka-txn-exporter's monitoring mixin: the recording and alerting rules and the Grafana
// dashboards the project generates, with what differs between installations in `_config`:
//
//   local mixin = (import 'mixin/mixin.libsonnet') + {
//     _config+:: {
//       selector: 'namespace="kafka"',         // added to every exporter series' matchers
//       jobSelector: 'job="txn-exporter"',     // the job TxnExporterDown watches
//       clusterLabel: 'kafka_cluster',         // the label that tells clusters apart
//       thresholds+:: { TxnExporterLagging: 5000 },
//       forDurations+:: { KafkaTransactionsLate: '15m' },
//       runbookURL: 'https://wiki.example.org/kafka-txn-runbooks',
//       grafanaURL: 'https://grafana.example.org',
//     },
//   };
//   mixin.prometheusRules, mixin.prometheusAlerts, mixin.grafanaDashboards
//
// templates.json is generated (python -m mixin.generate) from alerts/kafka-txn-exporter.rules.yml
// and dashboards/json/: with the default _config this gives exactly those files.
local templates = import 'templates.json';

local part(c, p) =
  if std.isString(p) then p
  else if std.objectHas(p, 'config') then c[p.config]
  else if std.objectHas(p, 'threshold') then std.format('%g', c.thresholds[p.threshold])
  else if std.objectHas(p, 'metric') then
    local matchers = std.filter(function(m) m != '', [std.join('', [part(c, q) for q in p.matchers]), c.selector]);
    p.metric + (if matchers == [] then '' else '{' + std.join(', ', matchers) + '}')
  else error 'unknown template part: ' + std.toString(p);

local expand(c, x) =
  if std.isObject(x) then
    if std.objectHas(x, '$parts') then std.join('', [part(c, p) for p in x['$parts']])
    else { [k]: expand(c, x[k]) for k in std.objectFields(x) }
  else if std.isArray(x) then [expand(c, v) for v in x]
  else x;

local rule(c, r) =
  local expanded = expand(c, r);
  if std.objectHas(r, 'alert') && c.forDurations[r.alert] != null
  then expanded { 'for': c.forDurations[r.alert] }
  else expanded;

local groups(c, kind) = [
  group { rules: [rule(c, r) for r in group.rules] }
  for group in templates.rules.groups
  if std.all([std.objectHas(r, kind) for r in group.rules])
];

{
  _config:: templates.defaults,

  prometheusRules:: { groups: groups($._config, 'record') },
  prometheusAlerts:: { groups: groups($._config, 'alert') },
  grafanaDashboards:: { [name]: expand($._config, templates.dashboards[name]) for name in std.objectFields(templates.dashboards) },
}
