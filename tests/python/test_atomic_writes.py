"""Every file ember writes over another is replaced atomically
(runtime/atomic_file.c): a save that fails on a full disk or a file-size
limit, or a process killed in the middle of one, leaves the previous file
whole and loadable (issue 38, item 6). Also what writing in place would
keep: the file's permissions, symbolic links, devices."""

import os
import signal
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import ember
from conftest import fill_disk, subprocess_env

FORMATS = ["ck.pt", "ck.safetensors"]


def checkpoint(n, seed=0):
    g = np.random.default_rng(seed)
    return {"w": ember.tensor(g.standard_normal(n, dtype=np.float32)), "step": seed}


def same(a, b):
    return a["step"] == b["step"] and np.array_equal(a["w"].numpy(), b["w"].numpy())


def temporaries(folder):
    return [p for p in os.listdir(folder) if ".ember-tmp-" in p]


@pytest.mark.parametrize("name", FORMATS)
def test_a_full_disk_leaves_the_previous_checkpoint(small_disk, name):
    path = small_disk / name
    old = checkpoint(50_000)  # 200 KB
    ember.save(old, path)
    with pytest.raises(OSError) as e:
        ember.save(checkpoint(400_000, seed=1), path)  # 1.6 MB: the disk fills
    assert e.value.errno == 28 and name in str(e.value)  # ENOSPC, naming the file
    assert same(ember.load(path), old)
    assert temporaries(small_disk) == []


CHILD_SAVE = r"""
import os, resource, sys
import numpy as np
import ember
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
path = sys.argv[1]
try:
    ember.save({"w": ember.tensor(np.ones(1 << 20, dtype=np.float32)), "step": 9}, path)
except OSError as e:
    print("errno", e.errno, path in str(e))
"""


@pytest.mark.parametrize("name", FORMATS)
def test_a_file_size_limit_leaves_the_previous_checkpoint(tmp_path, name):
    """RLIMIT_FSIZE: the write fails with EFBIG (Python ignores SIGXFSZ)."""
    path = tmp_path / name
    old = checkpoint(1000)
    ember.save(old, path)
    out = subprocess.run([sys.executable, "-c", CHILD_SAVE, str(path)], env=subprocess_env(), capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.split() == ["errno", "27", "True"], out.stderr[-2000:]
    assert same(ember.load(path), old)
    assert temporaries(tmp_path) == []


CHILD_LOOP = r"""
import sys
import numpy as np
import ember
w = ember.tensor(np.arange(1 << 26, dtype=np.float32))  # 256 MiB
print("ready", flush=True)
while True:
    ember.save({"w": w, "step": 1}, sys.argv[1])
"""


@pytest.mark.parametrize("name", FORMATS)
def test_a_save_killed_midway_leaves_the_previous_checkpoint(tmp_path, name):
    path = tmp_path / name
    old = checkpoint(1000)
    ember.save(old, path)
    proc = subprocess.Popen([sys.executable, "-c", CHILD_LOOP, str(path)], env=subprocess_env(),
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        while not temporaries(tmp_path) and time.monotonic() < deadline:  # a save under way
            time.sleep(0.005)
        assert temporaries(tmp_path), "the child never started writing"
        time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    back = ember.load(path)  # the old file, or a whole new one; never a fragment
    assert same(back, old) or (back["step"] == 1 and back["w"].shape == (1 << 26,))


def test_a_replaced_file_keeps_its_permissions_and_links_are_written_through(tmp_path):
    real, link = tmp_path / "real.pt", tmp_path / "link.pt"
    ember.save(checkpoint(10), real)
    real.chmod(0o640)
    link.symlink_to(real)
    ember.save(checkpoint(10, seed=3), link)
    assert link.is_symlink() and stat.S_IMODE(real.stat().st_mode) == 0o640
    assert same(ember.load(real), checkpoint(10, seed=3))
    fresh = tmp_path / "fresh.safetensors"
    old_mask = os.umask(0o027)
    try:
        ember.save(checkpoint(10), fresh)
    finally:
        os.umask(old_mask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640  # 0666 less the umask, as open() makes it


def test_saving_to_a_device_writes_in_place():
    ember.save(checkpoint(10), "/dev/null")
    ember.save(checkpoint(10), "/dev/null", format="pt")


def test_threads_saving_one_path_leave_one_whole_file(tmp_path):
    path = tmp_path / "ck.pt"
    cks = [checkpoint(20_000, seed=i) for i in range(4)]
    errors = []

    def work(ck):
        try:
            for _ in range(5):
                ember.save(ck, path)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(ck,)) for ck in cks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    back = ember.load(path)
    assert any(same(back, ck) for ck in cks)
    assert temporaries(tmp_path) == []


@pytest.mark.disk_size("64m")
def test_aot_models_are_replaced_atomically_on_a_full_disk(small_disk):
    if not ember.compiler.has_llvm():
        pytest.skip("ember.aot needs the LLVM backend")
    lin = ember.nn.Linear(4, 2)
    path = small_disk / "m.so"
    ember.aot.compile(lin, (ember.randn(3, 4),), str(path))
    before = path.read_bytes()
    filler = small_disk / "filler"
    fill_disk(filler)
    with pytest.raises(Exception):
        ember.aot.compile(lin, (ember.randn(3, 4),), str(path))
    assert path.read_bytes() == before
    assert temporaries(small_disk) == []
    filler.unlink()
    m = ember.aot.load(str(path))
    x = ember.randn(3, 4)
    np.testing.assert_allclose(m(x).numpy(), lin(x).detach().numpy(), rtol=1e-6, atol=1e-6)
