// The Grafana dashboards: the JSON beside this file (the one copy, which Grafana users import and
// kustomize packs into ConfigMaps), each query set again from `$._config` (queries.libsonnet: the
// same queries over `_config`, by panel id and refId, and by variable name).
local dashboards = import 'queries.libsonnet';

local withTargets(panel, queries) =
  panel
  + (if std.objectHas(panel, 'targets') then {
       targets: [t { expr: queries[std.toString(panel.id)][t.refId] } for t in panel.targets],
     } else {})
  + (if std.objectHas(panel, 'panels') then {  // a collapsed row's panels
       panels: [withTargets(p, queries) for p in panel.panels],
     } else {});

local withQueries(dashboard, queries) = dashboard {
  panels: [withTargets(p, queries.panels) for p in dashboard.panels],
  templating+: {
    list: [
      if std.objectHas(queries.variables, v.name) then v { query+: { query: queries.variables[v.name] } } else v
      for v in super.list
    ],
  },
};

{
  grafanaDashboards+:: {
    [name]: withQueries(dashboards[name].dashboard, dashboards[name].queries($._config))
    for name in std.objectFields(dashboards)
  },
}
