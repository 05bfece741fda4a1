"""Types shared by every meter: one sample, one device record, and the meter protocol.

Kept free of heavy imports so that `import meters` and starting a sampler cost milliseconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

# Measurement methods, as recorded per device (the run record says how each number was obtained).
ENERGY_COUNTER = "energy_counter"  # the GPU accounts energy itself: NVML total energy (Volta+), amdsmi accumulator
INSTANT_POWER = "instant_power"  # NVML_FI_DEV_POWER_INSTANT or amdsmi current_socket_power, polled and integrated
AVERAGE_POWER = "average_power"  # nvmlDeviceGetPowerUsage (pre-Ampere only) or average_socket_power (MI200-), integrated
RAPL = "rapl"  # Linux powercap energy counters (CPU package / DRAM)
ESTIMATED = "estimated"  # modelled, not measured (codecarbon-style TDP x load)
REPLAY = "replay"  # a recorded trace played back
UNAVAILABLE = "unavailable"  # nothing usable: the notes say why

METHODS = (ENERGY_COUNTER, INSTANT_POWER, AVERAGE_POWER, RAPL, ESTIMATED, REPLAY, UNAVAILABLE)


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One reading of one device.

    `energy_j_cumulative` counts from the meter's start (0 J at `start()`), so a consumer that
    misses samples loses time resolution, never energy. `power_w` is informative (None when unknown).
    """

    uuid: str
    t_monotonic: float
    energy_j_cumulative: float
    power_w: float | None = None


@dataclass(slots=True)
class DeviceInfo:
    """What a meter knows about one device and how it measures it: the provenance of its energy."""

    uuid: str
    name: str
    index: int | None = None
    method: str = UNAVAILABLE
    component: str = "gpu"  # gpu | cpu | dram | ram
    driver_version: str | None = None
    poll_period_s: float | None = None
    power_scope: str | None = None  # board | module (NVML); package | dram | psys (RAPL); host (estimate)
    architecture: str | None = None
    power_limit_w: float | None = None
    measured: bool = True  # False for modelled numbers (method "estimated")
    errors: int = 0
    max_gap_s: float | None = None
    notes: list[str] = field(default_factory=list)

    def note(self, message: str) -> None:
        """Record a note once (meters call this from hot paths; duplicates would grow without bound)."""
        if message not in self.notes:
            self.notes.append(message)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form for run.json and the journal."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeviceInfo:
        """Inverse of `to_dict`, ignoring keys this version does not know."""
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@runtime_checkable
class Meter(Protocol):
    """What the sampler needs from a meter. Implementations must not raise from `sample()`."""

    name: str

    def start(self) -> None: ...

    def sample(self) -> list[DeviceSample]: ...

    def stop(self) -> None: ...

    @property
    def devices(self) -> list[DeviceInfo]: ...
