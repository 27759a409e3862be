"""ember.cuda.precompile: every eager kernel of the CUDA device compiled
into the disk cache ahead of its first use, for a GPU or, without one, for a
compute capability. Needs NVRTC (no GPU): skipped where it cannot load."""
import os

import pytest

import ember


def test_precompile_fills_the_disk_cache_once(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    try:
        n, compiled = ember._C._cuda_precompile(90, 2)
    except NotImplementedError as e:
        if "NVRTC" in str(e) or "nvrtc" in str(e):
            pytest.skip(str(e))
        raise
    entries = [os.path.join(r, f) for r, _, files in os.walk(tmp_path) for f in files if f.endswith(".ptx")]
    # every elementwise op and cast of every dtype, every reduction, every
    # op along lines, every gather/scatter: one module each
    assert n > 600 and len(entries) == n and compiled == n  # (an empty cache: each compiled once)
    # a second time, every one is read back from the disk cache, none compiled again
    assert ember._C._cuda_precompile(90, 2) == (n, 0)
    assert ember.cuda.precompile(capability=(9, 0), threads=2) == n
    text = open(entries[0], "rb").read()  # (the cache's header, then the PTX)
    assert b".target sm_90" in text and b".entry em_cuda_" in text


def test_precompile_names_a_bad_capability():
    with pytest.raises(ValueError, match="compute capability 0.7 is not one"):
        ember.cuda.precompile(capability=(0, 7))
