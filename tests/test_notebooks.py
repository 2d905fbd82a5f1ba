"""The tutorial notebooks (docs/notebooks/): each is what tools/make_notebooks.py writes, was
committed executed, and executes again without error on the NumPy interpreter (nbclient, an
IPython kernel of this Python), its kernel errors shown located and without a traceback."""

from __future__ import annotations

import copy

import pytest

nbformat = pytest.importorskip("nbformat", reason="the docs extra: pip install -e '.[docs]'")
pytest.importorskip("nbclient", reason="the docs extra: pip install -e '.[docs]'")
pytest.importorskip("ipykernel", reason="the docs extra: pip install -e '.[docs]'")

from tools import make_notebooks  # noqa: E402

NOTEBOOKS = sorted(make_notebooks.NOTEBOOKS)


def _committed(name: str):
    return nbformat.read(make_notebooks.HERE / name, as_version=4)


def _sources(nb) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in nb.cells]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_committed_notebook_is_the_tools_and_was_executed(name):
    committed = _committed(name)
    fresh = make_notebooks.build(name, copy.deepcopy(make_notebooks.NOTEBOOKS[name]), False)
    assert _sources(committed) == _sources(fresh), (
        f"docs/notebooks/{name} differs from tools/make_notebooks.py: run the tool"
    )
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert all(c.outputs for c in code if "%%teeny_tx" in c.source or "show(" in c.source)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_notebook_executes_on_the_interpreter(name):
    nb = make_notebooks.build(name, copy.deepcopy(make_notebooks.NOTEBOOKS[name]))
    errors, shown = [], 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tagged = "raises-exception" in cell.metadata.get("tags", [])
        failed = [o for o in cell.outputs if o.output_type == "error"]
        assert bool(failed) == tagged, (cell.source, failed)
        errors += failed
        for out in cell.outputs:
            html = out.get("data", {}).get("text/html", "")
            if "show(" in cell.source and not tagged and "registers per thread" in html:
                shown += 1
    showing = [c for c in nb.cells if c.cell_type == "code" and "show(" in c.source]
    assert shown == sum("raises-exception" not in c.metadata.get("tags", []) for c in showing)
    for error in errors:  # located messages: `NAME:line:col: error: ...`, no traceback
        text = "\n".join(error.traceback)
        assert error.ename == "CompileError" and "error:" in text and "^" in text
        assert "Traceback" not in text and ".py" not in text
