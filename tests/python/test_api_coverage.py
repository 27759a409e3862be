"""docs/api_coverage.md is the gap list between PyTorch's public names and
ember's (issue 40, item 3). It is generated (tools/api_coverage.py); this
test generates it again and fails when the file differs, so that the list
cannot go stale: after adding or removing names, run the tool."""

import os
import re
import sys

import pytest

from conftest import requires_torch, torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))


@requires_torch
def test_the_coverage_table_is_current():
    import api_coverage
    with open(api_coverage.OUT) as f:
        stored = f.read()
    made_with = re.search(r"from PyTorch (\S+)'s exports", stored).group(1)
    if made_with != torch.__version__.split("+")[0]:
        pytest.skip(f"the table was made with PyTorch {made_with}; this is {torch.__version__}")
    fresh = api_coverage.generate()
    assert fresh == stored, ("docs/api_coverage.md is stale: run "
                             "PYTHONPATH=python:build/python python3 tools/api_coverage.py")


@requires_torch
def test_the_names_issue_40_lists_are_there():
    import api_coverage
    rows = {t: set(missing) | set(raising) for t, _, _, missing, raising in api_coverage.coverage()}
    for name in ("finfo", "iinfo", "allclose", "isclose", "normal", "multinomial", "bernoulli", "LongTensor",
                 "FloatTensor", "repeat_interleave", "diagonal"):
        assert name not in rows["torch"], name
    for name in ("uniform_", "normal_", "addcmul_", "addcdiv_", "index_add_", "repeat_interleave", "diagonal",
                 "type", "is_xpu"):
        assert name not in rows["torch.Tensor"], name
    assert "orthogonal_" not in rows["torch.nn.init"]


@requires_torch
def test_the_raising_names_raise_naming_themselves():
    """Every name _unsupported.py installs raises NotImplementedError that
    names it when called (functions), constructed (classes) or handed to a
    factory (dtypes and constants)."""
    import ember
    from ember import _unsupported
    targets = {"ember": ember, "values": ember, "Tensor": ember.Tensor, "linalg": ember.linalg}
    x = ember.ones(2, 2)
    seen = 0
    for family, (_, spaces) in _unsupported.FAMILIES.items():
        for space, names in spaces.items():
            for name in names.split():
                value = getattr(targets[space], name)
                if getattr(value, "_unsupported", None) is None:
                    continue  # (ember has it for real)
                seen += 1
                with pytest.raises(NotImplementedError, match=re.escape(name) + ".*" + re.escape(family)):
                    if space == "values":
                        ember.zeros(1, dtype=value)
                    elif space == "Tensor":
                        getattr(x, name)()
                    else:
                        value(x)
    assert seen > 200


def test_the_fourier_transforms_raise_and_are_counted_as_raising():
    """ember has no complex tensors, so fft.fft and its kin raise naming
    themselves, and the coverage table counts them as raising, not working;
    the real helpers work."""
    import ember
    import ember.fft
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import api_coverage
    for name in ("fft", "rfft", "irfft", "fftn", "hfft", "ihfft2"):
        with pytest.raises(NotImplementedError, match=rf"ember\.fft\.{name}\b.*complex"):
            getattr(ember.fft, name)(ember.ones(4))
        assert api_coverage._raises(ember.fft, name)
    assert ember.fft.fftfreq(4).tolist() == [0.0, 0.25, -0.5, -0.25]
    assert not api_coverage._raises(ember.fft, "fftfreq")
