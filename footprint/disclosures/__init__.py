"""Disclosures: the footprint written down in the set forms users are asked for.

Owns: the forms built from an assessment, a run record or a serving record: the EU AI Act's model documentation
fields (`eu_ai_act`), the Hugging Face model card's ``co2_eq_emissions`` and impact section, with the merge into an
existing card (`hf_card`), and the Software Carbon Intensity (`sci`); the figures they share (`common`), a disclosed
figure with its origin and its renderings (`facts`), and what a disclosure is about (`target`: a scenario, a run, a
fleet job or a served model).
Layer: consumers. May import the core (`footprint.lca`, `footprint.flops`, `errors`, `inputs`, `outputs`,
`escaping`), the producers through their public readers (`footprint.tracking.to_workload`,
`footprint.fleet.ledger.job_record`, `footprint.serving.report.serving_report`) and `footprint.api`; pyyaml, and
huggingface_hub for the card merge. Only the CLI (`footprint disclose`) and the public API import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from footprint.errors import FootprintError

FORMS = ("eu-ai-act", "hf", "sci")
FORMATS = ("md", "json", "yaml")
#: SCI's functional units (`footprint.disclosures.sci` says which apply to training and which to serving).
PER = ("token", "m-tokens", "step", "pflop", "run", "request", "1k-requests")
#: The model card's training_type values (the Hub's: pre-training or fine-tuning).
TRAINING_TYPES = ("pre-training", "fine-tuning")

__all__ = ["FORMATS", "FORMS", "PER", "TRAINING_TYPES", "Disclosure", "disclose"]


class Disclosure:
    """A filled-in form: ``data`` (plain JSON-able data, every figure with its provenance), ``text(fmt)`` its
    Markdown, JSON or YAML, and for the model card ``merge(readme)``."""

    def __init__(self, form: dict[str, Any]) -> None:
        from footprint.disclosures.facts import to_data

        self._form = form
        self.data: dict[str, Any] = to_data(form)

    @property
    def name(self) -> str:
        return str(self._form["form"])

    def text(self, fmt: str = "md") -> str:
        from footprint.disclosures import facts

        if fmt == "json":
            return facts.to_json(self.data)
        if fmt == "yaml":
            return facts.to_yaml(self.data)
        if fmt != "md":
            raise FootprintError(f"format is one of {', '.join(FORMATS)}, got {fmt!r}", key="--format")
        return _module(self.name).markdown(self.data, self._form)

    def merge(self, readme: str | Path) -> Path:
        """Write this card's metadata into an existing model card, its text untouched (``--as hf`` only)."""
        if self.name != "hf":
            raise FootprintError("--merge updates a model card: it needs --as hf", key="--merge")
        from footprint.disclosures.hf_card import merge

        return merge(self._form, readme)


def _module(form: str) -> Any:
    """The module that builds and renders ``form``."""
    if form == "sci":
        from footprint.disclosures import sci

        return sci
    if form == "hf":
        from footprint.disclosures import hf_card

        return hf_card
    from footprint.disclosures import eu_ai_act

    return eu_ai_act


def disclose(
    target: Any,
    form: str,
    *,
    per: str | None = None,
    job: str | None = None,
    model: str | None = None,
    link: str | None = None,
    training_type: str | None = None,
    parameters: float | None = None,
    active_parameters: float | None = None,
) -> Disclosure:
    """Fill in ``form`` ("eu-ai-act", "hf" or "sci") for a scenario (path or shipped name), a run directory, a fleet
    directory with ``job``, a serving record (``model`` picks one of its models), a run record dict or a stopped tracker.

    ``per`` is SCI's functional unit (token, m-tokens, step, pflop, run; request, 1k-requests for a served model);
    ``link`` is where the full assessment is published (default: the command that writes it); ``training_type``
    (pre-training or fine-tuning) goes into the model card; ``parameters`` (and ``active_parameters`` for a mixture of
    experts) state the model's size where the target records none (a serving record, a run tracked without model=),
    for the EU form's inference FLOP per token."""
    from footprint.disclosures.target import resolve

    if form not in FORMS:
        raise FootprintError(f"--as is one of {', '.join(FORMS)}, got {form!r}", key="--as")
    if per is not None and form != "sci":
        raise FootprintError("--per is SCI's functional unit: it needs --as sci", key="--per")
    if per is not None and per not in PER:
        raise FootprintError(f"--per is one of {', '.join(PER)}, got {per!r}", key="--per")
    if training_type is not None and form != "hf":
        raise FootprintError("--training-type goes into the model card: it needs --as hf", key="--training-type")
    stated = _stated_size(form, parameters, active_parameters)
    subject = resolve(target, job=job, model=model, link=link)
    if form == "sci":
        return Disclosure(_module(form).build(subject, per))
    if form == "hf":
        return Disclosure(_module(form).build(subject, training_type))
    return Disclosure(_module(form).build(subject, stated))


def _stated_size(form: str, parameters: float | None, active: float | None) -> dict[str, float]:
    """--parameters and --active-parameters, checked: they serve the EU form's inference FLOP per token only."""
    from footprint.bounds import check

    given = {k: v for k, v in (("parameters", parameters), ("active_parameters", active)) if v is not None}
    if given and form != "eu-ai-act":
        raise FootprintError(
            "--parameters gives the EU form's inference FLOP per token: it needs --as eu-ai-act", key="--parameters"
        )
    if "active_parameters" in given and "parameters" not in given:
        raise FootprintError("--active-parameters needs --parameters (the model's total)", key="--active-parameters")
    for k, v in given.items():
        check(f"model.{k}", v, label=f"--{k.replace('_', '-')}")
    if given.get("active_parameters", 0) > given.get("parameters", 0):
        raise FootprintError("--active-parameters is more than --parameters", key="--active-parameters")
    return given
