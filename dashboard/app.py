"""footprint dashboard: `footprint dashboard` or `streamlit run dashboard/app.py`.

A thin view: every number comes from footprint.assess and footprint.lca.database, on the bundled data,
offline. Pages: Scenario explorer, Compare, Runs, Hardware, Kernels, Fleet, Serving (sidebar).
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

try:
    import dashboard  # noqa: F401 - installed with footprint (pip install -e .)
except ImportError:  # run from a checkout without installing: the repository root holds the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dashboard import core, page_compare, page_explorer, page_fleet, page_hardware, page_kernels, page_runs, page_serving  # noqa: E402

PAGES = {
    "Scenario explorer": page_explorer.render,
    "Compare": page_compare.render,
    "Runs": page_runs.render,
    "Hardware": page_hardware.render,
    "Kernels": page_kernels.render,
    "Fleet": page_fleet.render,
    "Serving": page_serving.render,
}
# Widget values survive page switches (Streamlit drops the state of widgets not drawn in a run);
# buttons (btn_) and uploads (up_) cannot be reassigned and need not be.
KEPT_PREFIXES = ("ex_", "cmp_", "run_", "hw_", "k_", "fleet_", "serving_")
KEPT_KEYS = ("mc_more",)


def keep_widget_state() -> None:
    ss = st.session_state
    for key in list(ss.keys()):
        if isinstance(key, str) and (key.startswith(KEPT_PREFIXES) or key in KEPT_KEYS):
            ss[key] = ss[key]


def read_query_params() -> None:
    """Once per session: ?page=Compare, for the explorer ?scenario=gpt-4-falk.yaml&mfu=0.5&lifetime_years=5&grid=POL
    (any of mfu, gpu, count, lifetime_years, utilization, grid, pue, wue, ewif): shareable what-if links; and
    ?run=NAME (a run of the runs folder, ./runs unless ?runs=DIR) or ?run=PATH/TO/RUN opens the Runs page on it."""
    ss = st.session_state
    if ss.get("qp_read"):
        return
    ss["qp_read"] = True
    qp = st.query_params
    if qp.get("page") in PAGES:
        ss["page"] = qp["page"]
    opening = qp if qp.get("run") else _argv_run()  # a link wins over `footprint dashboard RUN`'s own argument
    if opening.get("run"):
        ss["run_pending"] = {"run": opening["run"], "runs": opening.get("runs")}
        ss.setdefault("page", "Runs")
    pending = {k: qp[k] for k in ("scenario", *core.CONTROL_KEYS) if k in qp}
    if pending:
        ss["ex_pending"] = pending


def _argv_run() -> dict[str, str]:
    """`--run RUN [--runs DIR]` after `streamlit run app.py --`: what `footprint dashboard [RUN]` opens on."""
    args, out = sys.argv[1:], {}
    for flag in ("run", "runs"):
        if f"--{flag}" in args[:-1]:
            out[flag] = args[args.index(f"--{flag}") + 1]
    return out


def main() -> None:
    st.set_page_config(page_title="footprint", layout="wide", initial_sidebar_state="expanded")
    keep_widget_state()
    read_query_params()
    side = st.sidebar
    side.markdown("## footprint\nLife-cycle footprint of AI training, 16 EF 3.1 categories")
    page = side.radio("Page", list(PAGES), key="page")
    more = side.toggle(
        f"Monte Carlo: {core.MORE_SAMPLES:,} samples",
        key="mc_more",
        help=f"{core.SAMPLES} samples by default (fast reruns); more samples give steadier low-high ranges",
    )
    samples = core.MORE_SAMPLES if more else core.SAMPLES
    PAGES[page](samples)
    side.divider()
    side.caption(
        "Offline, bundled data (lca_data/, codecarbon's energy mix). Every number comes from "
        "footprint.assess and footprint.lca.database."
    )


main()
