"""The Grafana dashboards' JSON (grafana-foundation-sdk, pinned): step 1 of `make generate`
(generators/run.py), which writes mixin/dashboards/*.json, the one copy that Grafana users,
kustomize (deploy/monitoring) and the mixin read. The dashboards are defined in
dashboards/overview.py and dashboards/drilldown.py, of dashboards/panels.py's parts; this renders
them, their queries with the placeholders (queries.placeholders) for the mixin, and with their
defaults for the committed files.
"""

from __future__ import annotations

import json
from pathlib import Path

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import prometheus as prom_b
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import timeseries as ts_b
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m

from dashboards.drilldown import DRILLDOWN
from dashboards.overview import OVERVIEW
from dashboards.panels import BUILD_INFO, CLUSTER_SEL, LAG, SEL, Dashboard, Panel
from queries.metrics import series
from queries.placeholders import CLUSTER, expand_all

OUT_DIR = Path(__file__).resolve().parents[1] / "mixin" / "dashboards"
OWNED = ("mixin/dashboards/*.json",)  # every JSON there is a generated dashboard
TAGS = ["kafka", "transactions", "kafka-txn-exporter"]

DASHBOARDS = (OVERVIEW, DRILLDOWN)

# -- rendering with the SDK ----------------------------------------------------------------------

DATASOURCE = dash_m.DataSourceRef(type_val="prometheus", uid="${datasource}")


def _variables(names: tuple[str, ...]) -> list[cogbuilder.Builder[dash_m.VariableModel]]:
    out: list[cogbuilder.Builder[dash_m.VariableModel]] = [
        dash_b.DatasourceVariable("datasource").label("Data source").type("prometheus")
    ]
    queries = {
        "cluster": f"label_values({series(BUILD_INFO)}, {CLUSTER})",
        "instance": f"label_values({series(BUILD_INFO, CLUSTER_SEL)}, instance)",
        "partition": f"label_values({series(LAG, SEL)}, partition)",
    }
    labels = {"cluster": "Cluster", "instance": "Broker (exporter)", "partition": "Partition"}
    for name in names:
        out.append(  # noqa: PERF401 (a builder chain per variable)
            dash_b.QueryVariable(name)
            .label(labels[name])
            .datasource(DATASOURCE)
            .query({"query": queries[name], "refId": f"{name}-variable", "qryType": 1})
            .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(
                dash_m.VariableSort.NATURAL_ASC
                if hasattr(dash_m.VariableSort, "NATURAL_ASC")
                else dash_m.VariableSort.ALPHABETICAL_ASC
            )
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(dash_m.VariableOption(selected=True, text="All", value="$__all"))
        )
    return out


def _thresholds(steps: tuple[tuple[float, str], ...]) -> dash_b.ThresholdsConfig:
    return (
        dash_b.ThresholdsConfig()
        .mode(dash_m.ThresholdsMode.ABSOLUTE)
        .steps([dash_m.Threshold(value=None, color="green"), *(dash_m.Threshold(value=v, color=c) for v, c in steps)])
    )


def _panel(spec: Panel, panel_id: int) -> stat_b.Panel | ts_b.Panel:
    builder: stat_b.Panel | ts_b.Panel
    if spec.kind == "stat":
        builder = (
            stat_b.Panel()
            .graph_mode(common_m.BigValueGraphMode.AREA)
            .color_mode(common_m.BigValueColorMode.BACKGROUND)
            .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        )
    else:
        timeseries = (
            ts_b.Panel()
            .line_width(1)
            .fill_opacity(10 if not spec.stacked else 60)
            .legend(
                common_b.VizLegendOptions()
                .display_mode(common_m.LegendDisplayMode.LIST)
                .placement(common_m.LegendPlacement.BOTTOM)
                .show_legend(True)
            )
            .tooltip(
                common_b.VizTooltipOptions().mode(common_m.TooltipDisplayMode.MULTI).sort(common_m.SortOrder.DESCENDING)
            )
        )
        if spec.stacked:
            timeseries = timeseries.stacking(common_b.StackingConfig().mode(common_m.StackingMode.NORMAL))
        builder = timeseries
    builder = (
        builder.id(panel_id)
        .title(spec.title)
        .description(spec.description)
        .datasource(DATASOURCE)
        .unit(spec.unit)
        .span(spec.width)
        .height(spec.height)
        .no_value("No data")
    )
    if spec.thresholds:
        builder = builder.thresholds(_thresholds(spec.thresholds))
    for i, query in enumerate(spec.queries):
        target = (
            prom_b.Dataquery()
            .expr(query.template)
            .legend_format(query.legend)
            .ref_id(chr(ord("A") + i))
            .datasource(DATASOURCE)
            .range()
        )
        builder = builder.with_target(target.exemplar(True) if spec.exemplars else target)
    return builder


def build(spec: Dashboard) -> dict:
    """The dashboard's JSON, its queries with the placeholders (the mixin's templates)."""
    builder = (
        dash_b.Dashboard(spec.title)
        .uid(spec.uid)
        .description(spec.description)
        .tags(TAGS)
        .editable()
        .tooltip(dash_m.DashboardCursorSync.CROSSHAIR)
        .time("now-1h", "now")
        .refresh("30s")
        .timezone("browser")
        .variables(_variables(spec.variables))
    )
    for uid, title in spec.links_to:
        builder = builder.link(
            dash_b.DashboardLink(title)
            .type(dash_m.DashboardLinkType.LINK)
            .url(f"/d/{uid}")
            .include_vars(True)
            .keep_time(True)
            .icon("dashboard")
        )
    panel_id = 1
    for row in spec.rows:
        row_builder = dash_b.Row(row.title).id(panel_id).collapsed(row.collapsed)
        panel_id += 1
        builder = builder.with_row(row_builder)
        for panel in row.panels:
            builder = builder.with_panel(_panel(panel, panel_id))
            panel_id += 1
    return json.loads(json.dumps(builder.build(), cls=JSONEncoder))


def render(spec: Dashboard) -> str:
    """The committed JSON: the default `_config`."""
    return json.dumps(expand_all(build(spec)), indent=2, sort_keys=True) + "\n"


def path_of(spec: Dashboard) -> Path:
    return OUT_DIR / f"{spec.uid}.json"


def outputs() -> dict[Path, str]:
    return {path_of(spec): render(spec) for spec in DASHBOARDS}
