"""Read and validate the LCA database files that live beside this module.

The loader fails loudly: a number without a source, a source id that is not registered, a missing
key or a value a unit parser rejects raises :class:`LcaDataError` naming the file and the key.
It imports nothing of the project's other packages; callers that want units checked pass a
``parse`` callable (footprint passes its pint registry's parser).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).resolve().parent
# scope of an inventory factor that covers only part of its chain (or of its flows): a labelled lower bound
LOWER_BOUND_SCOPE = "life_cycle_lower_bound"
# libyaml's C parser where PyYAML was built with it (~10x faster than the pure-Python one). Used for every YAML the
# project reads, through `StrictLoader` below (YAML 1.2 scalars, duplicate keys refused).
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_INT_DIGITS = 4300  # Python's own limit on int(str) (sys.get_int_max_str_digits): refused with a line, not a traceback
_INT, _FLOAT, _BOOL = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"


class StrictLoader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    """PyYAML's safe loader with YAML 1.2 core-schema scalars and no silent overwrite, because PyYAML follows YAML
    1.1: `count: 1:30` would be 90 (sexagesimal), `017` 15 (octal), `no` False, `1e3` a string; and a key given
    twice would silently replace the first block. Here only `true`/`false` are booleans, integers are decimal
    (or `0o`/`0x` as 1.2 spells them), `1:30` and `yes` stay strings, a duplicate key is an error naming its
    line, an integer over MAX_INT_DIGITS digits and a float literal that overflows to infinity are refused."""


StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT, _FLOAT, _BOOL)]
    for first, resolvers in _BASE_LOADER.yaml_implicit_resolvers.items()
}
StrictLoader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
StrictLoader.add_implicit_resolver(_INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789"))
StrictLoader.add_implicit_resolver(
    _FLOAT,
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+.0123456789"),
)


def _refuse(node: Any, problem: str) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


def _construct_int(loader: Any, node: Any) -> int:
    text = str(loader.construct_scalar(node))
    if text[:2] in ("0o", "0x"):
        return int(text[2:], 8 if text[1] == "o" else 16) if len(text) <= MAX_INT_DIGITS else _too_long(node)
    if len(text.lstrip("+-")) > MAX_INT_DIGITS:
        _too_long(node)
    return int(text, 10)


def _too_long(node: Any) -> int:
    raise _refuse(node, f"an integer with more than {MAX_INT_DIGITS:,} digits")


def _construct_float(loader: Any, node: Any) -> float:
    text = str(loader.construct_scalar(node))
    low = text.lower()
    if low.endswith(".nan"):
        return float("nan")
    if low.endswith(".inf"):
        return float("-inf") if text.startswith("-") else float("inf")
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _refuse(node, f"the number {text[:40]} overflows (larger than 1.8e308)")
    return value


def _construct_bool(loader: Any, node: Any) -> bool:
    return str(loader.construct_scalar(node)).lower() == "true"


def _construct_mapping(loader: Any, node: Any) -> dict[Any, Any]:
    """A mapping whose explicit keys are all different, with at most one `<<` merge key (a merged value may still be
    overridden by an explicit key, as YAML says)."""
    seen: dict[Any, Any] = {}
    merge = None
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # two `<<` keys: PyYAML silently lets the last one win
            if merge is not None:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"the merge key '<<' is given twice (first at line {merge.line + 1}); merge a list: <<: [*a, *b]",
                    key_node.start_mark,
                )
            merge = key_node.start_mark
            continue
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        key = (key_node.tag, key_node.value)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                f"key {key_node.value[:60]!r} is given twice (first at line {seen[key].line + 1}); keep one",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark
    loader.flatten_mapping(node)
    return loader.construct_mapping(node)


def _mapping(loader: Any, node: Any) -> Any:
    data: dict[Any, Any] = {}
    yield data
    data.update(_construct_mapping(loader, node))


StrictLoader.add_constructor(_INT, _construct_int)
StrictLoader.add_constructor(_FLOAT, _construct_float)
StrictLoader.add_constructor(_BOOL, _construct_bool)
StrictLoader.add_constructor("tag:yaml.org,2002:map", _mapping)
SAFE_LOADER: Any = StrictLoader
Parser = Callable[[str], Any]
_QUANTITY = re.compile(r"^\s*[-+]?(\d|\.\d)")  # "400 W", "1.8 L/kWh"; not "TSMC N7"


class LcaDataError(ValueError):
    """A malformed entry in an lca_data file."""

    def __init__(self, file: str | Path, key: str, message: str) -> None:
        self.file, self.key = str(file), key
        super().__init__(f"{Path(file).name}: {key}: {message}")


def _path(name: str, root: Path | None = None) -> Path:
    return (root or DATA_DIR) / name


# Limits every YAML the project reads is held to, checked on the parser's events before a single Python
# object is built: a 2 KB alias bomb would otherwise expand to gigabytes in whoever walks it (json.dumps,
# str, a deep copy), and libyaml's composer recurses once per nesting level (100,000 levels crash it).
MAX_YAML_BYTES = 5_000_000  # characters; scenario files and uploads have their own 1 MB limit on top
MAX_YAML_DEPTH = 64  # nested mappings and sequences (the deepest shipped file has 6)
MAX_YAML_NODES = 200_000  # nodes once every alias is expanded (gpus.yaml, the largest data file, has ~3,200)


class YamlLimitError(yaml.MarkedYAMLError):
    """A YAML document over the size, nesting or (alias-expanded) node limits: refused before it is built."""


def check_limits(
    text: str, max_bytes: int = MAX_YAML_BYTES, max_depth: int = MAX_YAML_DEPTH, max_nodes: int = MAX_YAML_NODES
) -> None:
    """Raise YamlLimitError if ``text`` is too large, nested too deep, or expands past ``max_nodes`` through its
    aliases. Reads libyaml's event stream (a state machine, no recursion); an alias counts every node of what
    it names, so a billion laughs is caught at its second line, in microseconds."""
    if len(text) > max_bytes:
        raise YamlLimitError(problem=f"document is larger than {max_bytes:,} characters")
    total = 0
    depth = 0
    starts: list[tuple[int, str | None]] = []  # per open collection: nodes counted before it, its anchor
    sizes: dict[str, int] = {}  # anchor -> nodes it expands to
    scalar, alias = yaml.ScalarEvent, yaml.AliasEvent
    opening, closing = (yaml.SequenceStartEvent, yaml.MappingStartEvent), (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    for ev in yaml.parse(text, Loader=SAFE_LOADER):
        if isinstance(ev, scalar):
            total += 1
            if ev.anchor:
                sizes[ev.anchor] = 1
        elif isinstance(ev, alias):
            total += sizes.get(ev.anchor, 1)
        elif isinstance(ev, opening):
            depth += 1
            if depth > max_depth:
                raise YamlLimitError(problem=f"nested deeper than {max_depth} levels", problem_mark=ev.start_mark)
            starts.append((total, ev.anchor))
            total += 1
        elif isinstance(ev, closing):
            depth -= 1
            before, anchor = starts.pop()
            if anchor:
                sizes[anchor] = total - before
        else:
            continue
        if total > max_nodes:
            what = "its aliases expand to" if sizes else "it has"
            raise YamlLimitError(
                problem=f"{what} more than {max_nodes:,} nodes (an alias bomb?)", problem_mark=getattr(ev, "start_mark", None)
            )


def safe_load(stream: Any, max_bytes: int = MAX_YAML_BYTES) -> Any:
    """``yaml.safe_load`` (libyaml's C loader where available) within the limits above: every YAML the project
    reads (lca_data, scenarios, ``--set`` values, dashboard uploads and pastes, kernel profiles) comes here.
    Bytes must be UTF-8; a document over a limit raises YamlLimitError (a yaml.YAMLError) before it is built."""
    text = stream.read() if hasattr(stream, "read") else stream
    if isinstance(text, bytes):
        text = text.decode("utf-8")  # UnicodeDecodeError: callers name the file
    if not isinstance(text, str):
        raise TypeError(f"safe_load expects text, got {type(text).__name__}")
    check_limits(text, max_bytes)
    return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader


def read_yaml(name: str, root: Path | None = None) -> Any:
    path = _path(name, root)
    try:
        with path.open(encoding="utf-8") as fh:
            return safe_load(fh)
    except FileNotFoundError:
        raise LcaDataError(path, "-", "file is missing") from None
    except UnicodeDecodeError:
        raise LcaDataError(path, "-", "not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "-"
        raise LcaDataError(path, where, f"malformed YAML ({getattr(exc, 'problem', exc)})") from None


def read_csv(name: str, root: Path | None = None, required: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """Rows of a CSV whose leading '#' lines are comments (licence and provenance headers)."""
    path = _path(name, root)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise LcaDataError(path, "-", "file is missing") from None
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    try:
        rows = list(csv.DictReader(io.StringIO(body)))
    except csv.Error as exc:  # a field over csv's size limit, a broken quote
        raise LcaDataError(path, "-", f"not a CSV this reader takes ({exc})") from None
    for i, row in enumerate(rows, start=2):
        for col in required:
            if not row.get(col):
                raise LcaDataError(path, f"row {i}, column {col!r}", "is empty")
    return rows


@lru_cache(maxsize=4)
def load_sources(root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every registered source (sources/*.yaml), by id; ids must be unique across files."""
    sources: dict[str, dict[str, Any]] = {}
    folder = _path("sources", root)
    for path in sorted(folder.glob("*.yaml")):
        data = read_yaml(f"sources/{path.name}", root) or {}
        for sid, entry in (data.get("sources") or {}).items():
            if sid in sources:
                raise LcaDataError(path, sid, "source id is defined twice")
            if not isinstance(entry, dict) or not entry.get("title") or not entry.get("licence"):
                raise LcaDataError(path, sid, "a source needs at least a title and a licence")
            sources[sid] = dict(entry, id=sid, file=path.name)
    return sources


def iter_values(node: Any, key: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (dotted key, entry) for every ``{value: ..., source: ...}`` entry in a YAML tree."""
    if isinstance(node, dict):
        if "value" in node:
            yield key, node
            return
        for k, v in node.items():
            yield from iter_values(v, f"{key}.{k}" if key else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            label = v.get("id") or v.get("key") if isinstance(v, dict) else None
            yield from iter_values(v, f"{key}[{label or i}]")


def check_values(tree: Any, file: str, parse: Parser | None = None, root: Path | None = None) -> None:
    """Every value has a registered source; every string value parses when ``parse`` is given."""
    sources = load_sources(root)
    for key, entry in iter_values(tree):
        sid = entry.get("source")
        if not sid:
            raise LcaDataError(file, key, f"value {entry.get('value')!r} has no source")
        if sid not in sources:
            raise LcaDataError(file, key, f"source {sid!r} is not registered in lca_data/sources/")
        value = entry["value"]
        if value is None or value == "":
            raise LcaDataError(file, key, "empty value (omit the key when the figure is not available)")
        if parse is not None and isinstance(value, str) and _QUANTITY.match(value):
            try:
                parse(value)
            except Exception as exc:
                raise LcaDataError(file, key, f"cannot read {value!r}: {exc}") from None


def check_row_sources(rows: list[dict[str, str]], file: str, root: Path | None = None, value: str = "value") -> None:
    sources = load_sources(root)
    for i, row in enumerate(rows, start=2):
        if row.get("source") not in sources:
            raise LcaDataError(file, f"row {i}", f"source {row.get('source')!r} is not registered")
        try:
            float(row[value])
        except (KeyError, ValueError):
            raise LcaDataError(file, f"row {i}", f"value {row.get(value)!r} is not a number") from None


def load_categories(root: Path | None = None) -> dict[str, Any]:
    data = read_yaml("categories.yaml", root)
    keys = [c.get("key") for c in data.get("categories", [])]
    if len(keys) != 16 or len(set(keys)) != 16:
        raise LcaDataError("categories.yaml", "categories", "must list 16 distinct EF 3.1 categories")
    return data


def load_gpus(parse: Parser | None = None, root: Path | None = None) -> list[dict[str, Any]]:
    """The GPU catalogue; ids and aliases unique, every number sourced."""
    data = read_yaml("gpus.yaml", root) or {}
    gpus = data.get("gpus")
    if not isinstance(gpus, list) or not gpus:
        raise LcaDataError("gpus.yaml", "gpus", "expected a non-empty list of cards")
    seen: dict[str, str] = {}
    ids: set[str] = set()
    for i, gpu in enumerate(gpus):
        if gpu.get("id") in ids:
            raise LcaDataError("gpus.yaml", f"gpus[{gpu.get('id')}]", "card id is defined twice")
        ids.add(gpu.get("id"))
        for req in ("id", "name", "vendor", "tdp", "peak_tflops", "parametric"):
            if req not in gpu:
                raise LcaDataError("gpus.yaml", f"gpus[{gpu.get('id', i)}]", f"missing key {req!r}")
        for name in [gpu["id"], gpu["name"], *gpu.get("aliases", [])]:
            norm = normalise_name(name)
            if norm in seen and seen[norm] != gpu["id"]:
                raise LcaDataError("gpus.yaml", f"gpus[{gpu['id']}]", f"name {name!r} also names {seen[norm]}")
            seen[norm] = gpu["id"]
    check_values(gpus, "gpus.yaml", parse, root)
    return gpus


def normalise_name(name: str) -> str:
    """Lenient GPU-name key: case, spaces, dashes, underscores and vendor prefixes ignored."""
    text = name.lower()
    for prefix in ("nvidia ", "amd ", "tesla ", "geforce ", "instinct "):
        text = text.replace(prefix, " ")
    return "".join(ch for ch in text if ch.isalnum())


def load_rows(name: str, columns: tuple[str, ...], root: Path | None = None) -> list[dict[str, str]]:
    """A one-value-per-row CSV: required columns filled, sources registered, values numeric."""
    rows = read_csv(name, root, columns)
    check_row_sources(rows, name, root)
    return rows


def load_ademe_components(root: Path | None = None) -> list[dict[str, str]]:
    return load_rows("ademe_gpu_components.csv", ("card", "component", "stage", "category", "value", "unit", "source"), root)


def load_parametric_factors(root: Path | None = None) -> list[dict[str, str]]:
    return load_rows("ademe_parametric_factors.csv", ("component", "stage", "category", "value", "unit", "source"), root)


def load_die_factor(root: Path | None = None) -> list[dict[str, str]]:
    """The GPU die's per-mm2 factor that ADEME's per-card dies imply (lca_data/tools/convert_ademe.py)."""
    return load_rows("ademe_die_factor.csv", ("component", "stage", "category", "value", "unit", "source"), root)


def load_distribution_factors(root: Path | None = None) -> list[dict[str, str]]:
    return load_rows("ademe_distribution_factors.csv", ("mode", "category", "value", "unit", "source"), root)


def load_data_quality(root: Path | None = None) -> dict[str, Any]:
    """lca_data/data_quality.yaml: the pedigree uncertainty factors of each EF data-quality criterion, scores 1..5."""
    name = "data_quality.yaml"
    data = read_yaml(name, root) or {}
    ped = data.get("pedigree") or {}
    if ped.get("source") not in load_sources(root):
        raise LcaDataError(name, "pedigree.source", "source is not registered")
    for k in ("ter", "ger", "tir", "p"):
        v = ped.get(k)
        if not isinstance(v, list) or len(v) != 5 or not all(isinstance(x, (int, float)) and x >= 1 for x in v):
            raise LcaDataError(name, f"pedigree.{k}", "expected five uncertainty factors >= 1 (scores 1..5)")
    return data


def load_host_impacts(root: Path | None = None) -> list[dict[str, str]]:
    """Per-server host impacts (written by tools/build_host.py): low <= value <= high, sources registered."""
    name = "host_impacts.csv"
    rows = read_csv(name, root, ("host", "category", "value", "low", "high", "unit", "source"))
    sources = load_sources(root)
    for i, row in enumerate(rows, start=2):
        for sid in row["source"].split(";"):
            if sid not in sources:
                raise LcaDataError(name, f"row {i}", f"source {sid!r} is not registered")
    _check_bounds(rows, name)
    return rows


def load_electricity_technologies(root: Path | None = None) -> list[dict[str, str]]:
    cols = ("technology", "codecarbon_field", "category", "value", "low", "high", "unit", "scope", "source")
    rows = load_rows("electricity_technologies.csv", cols, root)
    _check_bounds(rows, "electricity_technologies.csv")
    return rows


def load_electricity_zone_technologies(root: Path | None = None) -> list[dict[str, str]]:
    """Zone-specific technology factors (a fleet's own direct emissions), replacing the generic row in that zone."""
    cols = ("zone", "technology", "codecarbon_field", "category", "value", "low", "high", "unit", "scope", "source")
    rows = load_rows("electricity_zone_technologies.csv", cols, root)
    _check_bounds(rows, "electricity_zone_technologies.csv")
    return rows


def load_electricity_zones(root: Path | None = None) -> list[dict[str, str]]:
    return load_rows("electricity_zones.csv", ("zone", "quantity", "value", "unit", "source"), root)


def load_electricity_zone_cited(root: Path | None = None) -> list[dict[str, str]]:
    """Per-country factors quoted from other datasets, for the cross-check of the zone factors only."""
    return load_rows("electricity_zone_cited.csv", ("zone", "category", "value", "unit", "source"), root)


def load_electricity_cited(root: Path | None = None) -> list[dict[str, str]]:
    """Hand-transcribed per-technology values (role factor or crosscheck), read by tools/build_electricity.py."""
    rows = load_rows("electricity_cited.csv", ("technology", "category", "value", "unit", "source", "role"), root)
    for i, row in enumerate(rows, start=2):
        if row["role"] not in ("factor", "crosscheck"):
            raise LcaDataError("electricity_cited.csv", f"row {i}, column 'role'", "expected factor or crosscheck")
    return rows


def load_electricity_crosscheck(root: Path | None = None) -> list[dict[str, str]]:
    """Each factor beside an independent second source (both sources registered, both values numeric)."""
    cols = ("subject", "category", "quantity", "value", "unit", "source", "second_value", "second_source", "contested")
    rows = load_rows("electricity_crosscheck.csv", cols, root)
    sources = load_sources(root)
    for i, row in enumerate(rows, start=2):
        if row["second_source"] not in sources:
            raise LcaDataError("electricity_crosscheck.csv", f"row {i}", f"source {row['second_source']!r} is not registered")
        _number(row, "second_value", "electricity_crosscheck.csv", i)
        if row["contested"] not in ("true", "false"):
            raise LcaDataError("electricity_crosscheck.csv", f"row {i}, column 'contested'", "expected true or false")
    return rows


def load_normalisation(root: Path | None = None) -> list[dict[str, str]]:
    """EF 3.1 normalisation factors and weights: one row per category, weights summing to 100 %."""
    name = "ef_normalisation_weighting.csv"
    rows = read_csv(name, root, ("category", "normalisation", "unit", "weight_percent", "source"))
    check_row_sources(rows, name, root, value="normalisation")
    keys = [c["key"] for c in load_categories(root)["categories"]]
    if sorted(r["category"] for r in rows) != sorted(keys):
        raise LcaDataError("ef_normalisation_weighting.csv", "category", "must list each of the 16 categories once")
    for i, row in enumerate(rows, start=2):
        if _number(row, "normalisation", "ef_normalisation_weighting.csv", i) <= 0:
            raise LcaDataError("ef_normalisation_weighting.csv", f"row {i}, column 'normalisation'", "must be positive")
        _number(row, "weight_percent", "ef_normalisation_weighting.csv", i)
    total = sum(float(r["weight_percent"]) for r in rows)
    if abs(total - 100) > 0.01:
        raise LcaDataError("ef_normalisation_weighting.csv", "weight_percent", f"weights sum to {total:g} %, not 100 %")
    return rows


def load_embodied_corrections(root: Path | None = None) -> dict[str, Any]:
    data = load_yaml_checked("embodied_corrections.yaml", None, root)
    variants = data.get("variants") or {}
    if data.get("default") not in variants or "published" not in variants:
        raise LcaDataError("embodied_corrections.yaml", "default", "expected variants 'published' and a default among them")
    for cid, c in (data.get("corrections") or {}).items():
        if c.get("source") not in load_sources(root):
            raise LcaDataError("embodied_corrections.yaml", f"corrections.{cid}.source", "source is not registered")
        if not c.get("reason"):
            raise LcaDataError("embodied_corrections.yaml", f"corrections.{cid}.reason", "a correction needs its reason")
    return data


def _number(row: dict[str, str], col: str, file: str, i: int) -> float:
    try:
        v = float(row[col])
    except (KeyError, ValueError):
        raise LcaDataError(file, f"row {i}, column {col!r}", f"{row.get(col)!r} is not a number") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise LcaDataError(file, f"row {i}, column {col!r}", "is not finite")
    return v


def _check_bounds(rows: list[dict[str, str]], file: str) -> None:
    """low <= value <= high on every row."""
    for i, row in enumerate(rows, start=2):
        lo, v, hi = (_number(row, c, file, i) for c in ("low", "value", "high"))
        if not lo <= v <= hi:
            raise LcaDataError(file, f"row {i}", f"expected low <= value <= high, got {lo:g} / {v:g} / {hi:g}")


def load_yaml_checked(name: str, parse: Parser | None = None, root: Path | None = None) -> Any:
    """A YAML data file whose every ``{value, source}`` entry is checked."""
    data = read_yaml(name, root) or {}
    check_values(data, name, parse, root)
    return data
