"""CPU package and DRAM energy from Linux powercap (RAPL) counters.

RAPL zones are hierarchical: ``core`` and ``uncore`` are parts of their ``package`` and ``psys``
contains everything, so summing all zones over-counts (MEASUREMENT.md section 2). This meter counts
each ``package-N`` once, plus ``dram`` (a separate RAPL domain even where sysfs nests it under the
package), skips core/uncore (and psys unless asked to use psys instead), and de-duplicates the MSR
(``intel-rapl``) and MMIO (``intel-rapl-mmio``) interfaces, preferring MMIO like codecarbon.
Counters wrap at ``max_energy_range_uj``; a wrap between two samples is completed. Unreadable
counters (root-only since CVE-2020-8694) are reported in the notes, never raised.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .base import RAPL, UNAVAILABLE, DeviceInfo, DeviceSample

DEFAULT_ROOT = "/sys/class/powercap"
_ZONE = re.compile(r"^(intel-rapl(?:-mmio)?):(\d+)(?::(\d+))?$")
PERMISSION_HINT = (
    "RAPL counters are root-only on most distributions since CVE-2020-8694; run as root or "
    "`sudo chmod -R a+r /sys/class/powercap/intel-rapl*` (non-persistent)"
)


def _read_text(path: str) -> str:
    """Read one sysfs attribute (module-level so tests can simulate permission errors as root)."""
    with open(path) as fh:
        return fh.read()


def _read_int(path: str) -> int:
    return int(_read_text(path).strip())


@dataclass
class _Domain:
    key: str  # package-0, dram-0, psys
    zone_dir: str
    interface: str  # msr | mmio
    info: DeviceInfo
    max_range_uj: int | None = None
    last_uj: int | None = None
    last_t: float | None = None
    energy_j: float = 0.0
    power_w: float | None = None
    readable: bool = True
    wraps: int = 0
    events: list[str] = field(default_factory=list)


class RaplMeter:
    """RAPL energy per CPU package and DRAM domain. `root` is injectable for tests."""

    name = "rapl"

    def __init__(
        self,
        root: str | os.PathLike[str] = DEFAULT_ROOT,
        *,
        include_dram: bool = True,
        prefer_psys: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = os.fspath(root)
        self.include_dram = include_dram
        self.prefer_psys = prefer_psys
        self._clock = clock
        self._lock = threading.Lock()
        self._domains: list[_Domain] = []
        self._discovered = False
        self.notes: list[str] = []

    # --- discovery ----------------------------------------------------------------------------------

    def discover(self) -> list[DeviceInfo]:
        """Find the domains to count and check they are readable (cheap; done once)."""
        with self._lock:
            if not self._discovered:
                self._discovered = True
                try:
                    self._discover()
                except Exception as exc:
                    self.notes.append(f"RAPL discovery failed: {type(exc).__name__}: {exc}")
            return [d.info for d in self._domains]

    def _zone_dirs(self) -> dict[str, str]:
        """Zone id (e.g. 'intel-rapl:0:1') -> directory, from the flat listing and one level of nesting."""
        zones: dict[str, str] = {}
        for entry in sorted(os.listdir(self.root)):
            path = os.path.join(self.root, entry)
            if _ZONE.match(entry):
                zones.setdefault(entry, path)
                if os.path.isdir(path):
                    for sub in sorted(os.listdir(path)):
                        if _ZONE.match(sub):
                            zones.setdefault(sub, os.path.join(path, sub))
        return zones

    def _discover(self) -> None:
        if not os.path.isdir(self.root):
            self.notes.append(f"no powercap directory at {self.root} (not Linux, or RAPL not exposed)")
            return
        zones = self._zone_dirs()
        if not zones:
            self.notes.append(f"no intel-rapl zones under {self.root}")
            return
        names: dict[str, str] = {}
        for zone_id, path in zones.items():
            try:
                names[zone_id] = _read_text(os.path.join(path, "name")).strip()
            except OSError as exc:
                self.notes.append(f"{zone_id}: name unreadable ({exc})")
        candidates: dict[str, list[_Domain]] = {}
        skipped: set[str] = set()
        for zone_id, name in names.items():
            m = _ZONE.match(zone_id)
            assert m is not None
            interface = "mmio" if m.group(1).endswith("mmio") else "msr"
            parent_name = names.get(f"{m.group(1)}:{m.group(2)}", "") if m.group(3) is not None else None
            if name.startswith("package"):
                key, component, scope = name, "cpu", "package"
            elif name == "dram":
                socket = parent_name.split("-")[-1] if parent_name and parent_name.startswith("package") else m.group(2)
                key, component, scope = f"dram-{socket}", "dram", "dram"
            elif name == "psys":
                key, component, scope = "psys", "platform", "psys"
            else:  # core, uncore and anything nested inside a package
                skipped.add(name)
                continue
            index = int(key.split("-")[-1]) if key.split("-")[-1].isdigit() else None
            info = DeviceInfo(uuid=f"rapl:{key}", name=key, index=index, method=RAPL, component=component, power_scope=scope)
            candidates.setdefault(key, []).append(_Domain(key, os.path.join(zones[zone_id]), interface, info))
        if skipped:
            self.notes.append(f"RAPL subdomains {sorted(skipped)} are inside their package and not added again")

        has_psys = "psys" in candidates
        for key in sorted(candidates, key=_domain_order):
            if key == "psys" and not self.prefer_psys:
                self.notes.append("psys (whole platform) domain present but not used: it contains the packages")
                continue
            if self.prefer_psys and has_psys and key != "psys":
                continue
            if key.startswith("dram") and not self.include_dram:
                continue
            options = sorted(candidates[key], key=lambda d: d.interface != "mmio")  # MMIO first
            chosen = None
            for dom in options:
                if self._probe(dom):
                    chosen = dom
                    break
            if chosen is None:
                chosen = options[0]
            if len(options) > 1:
                chosen.info.note(f"both MSR and MMIO interfaces expose {key}; counted once via {chosen.interface}")
            self._domains.append(chosen)

    def _probe(self, dom: _Domain) -> bool:
        try:
            dom.max_range_uj = _read_int(os.path.join(dom.zone_dir, "max_energy_range_uj"))
        except (OSError, ValueError) as exc:
            dom.info.note(f"max_energy_range_uj unreadable ({type(exc).__name__}); wrap-around cannot be corrected")
        try:
            _read_int(os.path.join(dom.zone_dir, "energy_uj"))
        except PermissionError:
            dom.readable = False
            dom.info.method = UNAVAILABLE
            dom.info.note(f"energy_uj not readable (permission denied): {PERMISSION_HINT}")
            return False
        except (OSError, ValueError) as exc:
            dom.readable = False
            dom.info.method = UNAVAILABLE
            dom.info.note(f"energy_uj unreadable ({type(exc).__name__}: {exc})")
            return False
        dom.readable = True
        dom.info.method = RAPL
        dom.info.notes = [n for n in dom.info.notes if not n.startswith("energy_uj")]
        return True

    # --- Meter protocol -----------------------------------------------------------------------------

    @property
    def devices(self) -> list[DeviceInfo]:
        return [d.info for d in self._domains]

    @property
    def available(self) -> bool:
        """True if at least one CPU package counter is readable."""
        self.discover()
        return any(d.readable and d.info.component == "cpu" for d in self._domains)

    @property
    def has_dram(self) -> bool:
        self.discover()
        return any(d.readable and d.info.component == "dram" for d in self._domains)

    def start(self) -> None:
        """Discover (if needed) and take the baseline readings."""
        self.discover()
        with self._lock:
            for dom in self._domains:
                if dom.readable:
                    self._read(dom)
            if not any(d.readable for d in self._domains):
                self.notes.append("no readable RAPL counter: CPU/DRAM energy not measured here")

    def sample(self) -> list[DeviceSample]:
        """Cumulative energy per readable domain since start. Never raises."""
        out: list[DeviceSample] = []
        with self._lock:
            for dom in self._domains:
                if not dom.readable:
                    continue
                try:
                    self._read(dom)
                except Exception as exc:
                    dom.info.errors += 1
                    dom.info.note(f"read error skipped: {type(exc).__name__}: {exc}")
                if dom.last_t is not None:
                    out.append(DeviceSample(dom.info.uuid, dom.last_t, dom.energy_j, dom.power_w))
        return out

    def stop(self) -> None:
        with self._lock:
            for dom in self._domains:
                if dom.wraps:
                    dom.info.note(f"counter wrapped {dom.wraps} time(s); completed with max_energy_range_uj")
                if dom.info.errors:
                    dom.info.note(f"{dom.info.errors} failed readings in total")

    def _read(self, dom: _Domain) -> None:
        t = self._clock()
        try:
            uj = _read_int(os.path.join(dom.zone_dir, "energy_uj"))
        except PermissionError:
            dom.info.errors += 1
            dom.info.note(f"energy_uj became unreadable (permission denied): {PERMISSION_HINT}")
            return
        except (OSError, ValueError) as exc:
            dom.info.errors += 1
            dom.info.note(f"read error skipped: {type(exc).__name__}: {exc}")
            return
        if dom.last_uj is None or dom.last_t is None:
            dom.last_uj, dom.last_t = uj, t
            return
        delta = uj - dom.last_uj
        if delta < 0:
            if dom.max_range_uj:
                delta += dom.max_range_uj
                dom.wraps += 1
            else:
                dom.info.errors += 1
                dom.info.note("counter went backwards and the wrap range is unknown: interval dropped")
                delta = 0
        dt = t - dom.last_t
        dom.energy_j += delta / 1e6
        dom.power_w = delta / 1e6 / dt if dt > 0 else dom.power_w
        if dom.info.max_gap_s is None or dt > dom.info.max_gap_s:
            dom.info.max_gap_s = dt
        dom.last_uj, dom.last_t = uj, t


def _domain_order(key: str) -> tuple[int, str]:
    return ({"package": 0, "dram": 1}.get(key.split("-")[0], 2), key)
