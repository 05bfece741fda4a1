"""A dashboard page shown a directory whose notes carry Markdown (an outside image, a link): shown as text, never
rendered (the image would be fetched when the page opens). Shared by the Serving and Fleet page tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from _paths import REPO

HOSTILE = "![t](http://203.0.113.9/t.png) [x](http://203.0.113.9/)"


def assert_notes_shown_as_typed(source: Path, tmp_path: Path, meta_file: str, page: str, dir_key: str, prefix: str) -> None:
    from streamlit.testing.v1 import AppTest

    copy = Path(shutil.copytree(source, tmp_path / source.name))
    meta = json.loads((copy / meta_file).read_text())
    meta["notes"] = [*meta.get("notes", []), f"{prefix} {HOSTILE}"]
    (copy / meta_file).write_text(json.dumps(meta))
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=90)
    at.run()
    at.sidebar.radio(key="page").set_value(page).run()
    at.text_input(key=dir_key).set_value(str(copy)).run()
    assert not at.exception and not at.error
    shown = [m.value for m in at.markdown if "203.0.113.9" in m.value]
    assert shown and all("![t](" not in v and "[x](" not in v for v in shown), shown
