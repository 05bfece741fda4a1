"""Live metrics for Prometheus: an HTTP endpoint (loopback by default) or a textfile for node_exporter.

    PrometheusExporter(tracker, port=9464).start()          # http://127.0.0.1:9464/metrics
    PrometheusExporter(tracker, textfile="/var/lib/node_exporter/footprint.prom").start()

Opt-in (the callbacks' ``prometheus_port`` / ``prometheus_textfile``, `footprint run --prometheus-port`):
nothing listens unless asked, and only on 127.0.0.1 unless ``addr`` says otherwise. Gauges are the
live metrics (``footprint.integrations.live``) named ``footprint_<metric>`` with labels ``run`` and
``rank``; `footprint export prometheus RUN` writes a finished run's assessment in the same format.
Needs the ``prometheus_client`` package (``pip install footprint[integrations]``).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

HELP = {
    "energy_kwh": "IT energy measured by this rank's meters since the tracker started (kWh)",
    "gpu_energy_kwh": "GPU energy measured by this rank since the tracker started (kWh)",
    "gpu_power_w": "latest GPU power of this rank (W)",
    "co2eq_kg_use_phase": "use-phase climate change: energy x PUE x grid carbon intensity (kg CO2 eq)",
    "mfu": "model FLOPs utilisation over the last steps (fraction of the dense peak)",
    "tokens": "tokens this rank has trained on",
    "tokens_per_s": "tokens per second since the tracker started",
    "steps": "optimizer steps",
}


def metric_name(key: str) -> str:
    """``footprint/energy_kwh`` -> ``footprint_energy_kwh`` (Prometheus' [a-zA-Z_:][a-zA-Z0-9_:]*)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", key if key.startswith("footprint") else f"footprint_{key}")


class _Collector:
    def __init__(self, values: Callable[[], dict[str, float]], labels: dict[str, str], helps: dict[str, str]) -> None:
        self.values = values
        self.labels = labels
        self.helps = helps

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        for key, value in self.values().items():
            short = key.removeprefix("footprint/")
            g = GaugeMetricFamily(metric_name(key), self.helps.get(short, short.replace("_", " ")), labels=list(self.labels))
            g.add_metric(list(self.labels.values()), float(value))
            yield g


def registry_for(values: Callable[[], dict[str, float]], labels: dict[str, str], helps: dict[str, str] | None = None) -> Any:
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Collector(values, labels, HELP if helps is None else helps))
    return reg


class PrometheusExporter:
    """Serves (``port``) and/or writes (``textfile``, every ``interval_s``) a tracker's live metrics."""

    def __init__(
        self,
        tracker: Any,
        port: int | None = None,
        textfile: str | Path | None = None,
        addr: str = "127.0.0.1",
        interval_s: float = 5.0,
    ) -> None:
        from footprint.integrations.live import LiveMetrics

        self.live = LiveMetrics(tracker)
        self.registry = registry_for(self.live.compute, {"run": str(tracker.name), "rank": str(tracker.dist.rank)})
        self.port, self.addr = port, addr
        self.textfile = Path(textfile) if textfile else None
        self.interval_s = interval_s
        self._server: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PrometheusExporter:
        from prometheus_client import start_http_server

        if self.port is not None:
            self._server, _ = start_http_server(self.port, addr=self.addr, registry=self.registry)
            self.port = self._server.server_address[1]  # the port actually bound (port=0 picks a free one)
        if self.textfile is not None:
            self.write()
            self._thread = threading.Thread(target=self._loop, name="footprint-prometheus", daemon=True)
            self._thread.start()
        return self

    def write(self) -> None:
        from prometheus_client import generate_latest

        from footprint.outputs import write_bytes

        write_bytes(self.textfile, generate_latest(self.registry))  # whole or not at all; never over a pipe or device

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with contextlib.suppress(Exception):
                self.write()

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.textfile is not None:
            with contextlib.suppress(Exception):
                self.write()  # the last values


def write_run_textfile(values: dict[str, float], labels: dict[str, str], path: str | Path) -> Path:
    """A finished run's metrics (``footprint.integrations.metrics.metrics``) as a Prometheus textfile."""
    from prometheus_client import generate_latest

    from footprint.outputs import write_bytes

    path = Path(path)
    helps = {k.removeprefix("footprint/"): f"footprint assessment of the run: {k.removeprefix('footprint/')}" for k in values}
    write_bytes(path, generate_latest(registry_for(lambda: values, labels, helps)))
    return path
