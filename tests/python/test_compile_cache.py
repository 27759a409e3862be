"""The on-disk cache of compiled code (codegen_llvm/code.c): a fresh
process's compile of a graph compiled before loads the stored object code
and gives the same results; damaged entries are ignored with one warning
and replaced; an unusable directory costs one warning and nothing else;
EMBER_CACHE=0 writes nothing; clear_cache() empties it; the size bound
keeps the newest entries; racing processes leave a valid entry. Each test
runs its compiles in child processes against a directory of its own."""

import hashlib
import hmac
import os
import pathlib
import stat
import struct
import subprocess
import sys

import pytest

import ember
from conftest import fill_disk, subprocess_env

pytestmark = pytest.mark.skipif(not ember.compiler.has_llvm(), reason="ember was built without LLVM")

# Compiles f (and, with "more", two other graphs), checks the result against
# eager to the bit, prints how the code came and the result's checksum.
SCRIPT = r"""
import sys
import numpy as np
import ember
F = ember.nn.functional

def f(x, w):
    return F.gelu(x @ w).sum(1) * 2

def g(x):
    return (x * 3 + 1).relu()

def h(x):
    return x.exp().mean(0)

x = ember.tensor(np.linspace(-2, 2, 64 * 64, dtype=np.float32).reshape(64, 64))
w = ember.tensor(np.linspace(1, -1, 64 * 64, dtype=np.float32).reshape(64, 64))
fns = [(ember.compile(f), (x, w))]
if "more" in sys.argv:
    fns += [(ember.compile(g), (x,)), (ember.compile(h), (x,))]
for fn, args in fns:
    got = fn(*args)
    with ember.compiler.disabled():
        want = fn(*args)
    assert np.array_equal(got.numpy(), want.numpy()), "compiled differs from eager"
    text = ember.compiler.explain(fn, *args, print_report=False).text
    line = [l.strip() for l in text.splitlines() if "machine code" in l]
    print(line[0] if line else "no machine code line")
    print("kernels:", sorted(set(l.split("[")[1].split("]")[0] for l in text.splitlines() if " [cache " in l)))
print("ok", float(got.sum()))
"""


def run(cache_dir, *args, **env):
    e = subprocess_env(EMBER_CACHE_DIR=str(cache_dir), **env)
    out = subprocess.run([sys.executable, "-c", SCRIPT, *args], env=e, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout, out.stderr


FOLDER = "ember-cache-v1"  # (the folder ember makes inside EMBER_CACHE_DIR and owns)


def entries(cache_dir):
    folder = pathlib.Path(cache_dir) / FOLDER
    return sorted(p for p in os.listdir(folder) if p.endswith(".o")) if folder.exists() else []


def test_a_fresh_process_loads_what_an_earlier_one_compiled(tmp_path):
    out1, err1 = run(tmp_path)
    assert "compiled now" in out1 and err1 == ""
    assert "kernels: ['cache miss']" in out1  # (explain says it per kernel too)
    assert len(entries(tmp_path)) == 1
    out2, err2 = run(tmp_path)
    assert "loaded from the compile cache" in out2 and err2 == ""
    assert "kernels: ['cache hit']" in out2
    assert out1.splitlines()[-1] == out2.splitlines()[-1]  # the same result


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "foreign"])
def test_a_damaged_entry_is_ignored_with_one_warning_and_replaced(tmp_path, damage):
    run(tmp_path)
    (name,) = entries(tmp_path)
    path = tmp_path / FOLDER / name
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    elif damage == "truncate":
        data = data[:len(data) // 3]
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray(b"\x7fELF" + bytes(100))
    path.write_bytes(bytes(data))
    out, err = run(tmp_path)
    assert "compiled now" in out
    assert err.count("ember: compile cache: ignoring the damaged or foreign entry") == 1, err
    out, err = run(tmp_path)  # replaced by a good one
    assert "loaded from the compile cache" in out and err == ""


def test_an_unusable_directory_costs_one_warning(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    out, err = run(blocked / "cache", "more")
    assert out.count("compiled now") == 3
    assert err.count("ember: compile cache:") == 1, err
    # a read-only directory: one of our own, or, for root (who writes anywhere
    # the permissions say not to), /proc, where nobody can make files
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    out, err = run(ro if os.geteuid() != 0 else "/proc", "more")
    assert out.count("compiled now") == 3 and err.count("ember: compile cache:") == 1, err


def test_cache_off_writes_nothing_and_clear_cache_empties(tmp_path):
    out, _ = run(tmp_path, EMBER_CACHE="0")
    assert "compiled now" in out and entries(tmp_path) == []
    run(tmp_path, "more")
    assert len(entries(tmp_path)) == 3
    code = "import ember; ember.compiler.clear_cache()"
    subprocess.run([sys.executable, "-c", code], env=subprocess_env(EMBER_CACHE_DIR=str(tmp_path)), check=True)
    assert entries(tmp_path) == []


def test_the_size_bound_keeps_the_newest(tmp_path):
    run(tmp_path, "more", EMBER_CACHE_MAX_MB="0")
    assert len(entries(tmp_path)) == 1  # the last stored
    out, _ = run(tmp_path, "more")
    assert out.count("loaded from the compile cache") == 1


def test_racing_processes_leave_a_valid_entry(tmp_path):
    env = subprocess_env(EMBER_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, "more"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0 and "ok" in out, err[-2000:]
    assert len(entries(tmp_path)) == 3
    assert not [p for p in os.listdir(tmp_path / FOLDER) if p.startswith(".")]  # no temporary left
    out, err = run(tmp_path, "more")
    assert out.count("loaded from the compile cache") == 3 and err == ""


def test_identical_graphs_in_one_process_share_their_code(tmp_path):
    code = SCRIPT.replace('print("ok"', 'f2 = ember.compile(lambda x, w: f(x, w)); f2(x, w)\n'
                          'print([l.strip() for l in ember.compiler.explain(f2, x, w, print_report=False)'
                          '.text.splitlines() if "machine code" in l][0])\nprint("ok"')
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env(EMBER_CACHE_DIR=str(tmp_path)),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "shared with an identical graph compiled before" in out.stdout, out.stdout


# ---------------------------------------------------------------- issue 38, items 7-10: whose files, whose code

def test_the_cache_touches_nothing_but_its_own_folder(tmp_path):
    """EMBER_CACHE_DIR pointed at a folder of photos named by their MD5,
    with dotfiles: eviction once deleted a photo, clear_cache() the
    dotfiles. Now nothing outside ember's folder is touched, nor any file in
    it that is not an entry (named as one and marked by its magic)."""
    mine = {"0123456789abcdef0123456789abcdef.jpg": b"\xff\xd8 a photo",
            "fedcba9876543210fedcba9876543210.o": b"a user's object file",
            ".my_personal_notes_about_this_project.txt": b"notes",
            ".0123456789abcdef0123456789abcdef.o.tmp": b"mine too"}
    for name, data in mine.items():
        (tmp_path / name).write_bytes(data)
    run(tmp_path, "more", EMBER_CACHE_MAX_MB="0")  # (every store evicts)
    stray = tmp_path / FOLDER / "00000000000000000000000000000000.o"
    stray.write_bytes(b"named like an entry, without the magic")
    subprocess.run([sys.executable, "-c", "import ember; ember.compiler.clear_cache()"], check=True,
                   env=subprocess_env(EMBER_CACHE_DIR=str(tmp_path)))
    for name, data in mine.items():
        assert (tmp_path / name).read_bytes() == data, name
    assert stray.exists() and entries(tmp_path) == [stray.name]


def test_a_new_cache_folder_is_private(tmp_path):
    run(tmp_path)
    assert stat.S_IMODE((tmp_path / FOLDER).stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / FOLDER / "secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / FOLDER / entries(tmp_path)[0]).stat().st_mode) == 0o600


def _refused(tmp_path, why):
    out, err = run(tmp_path)
    assert "compiled now" in out and err.count("ember: compile cache: not using") == 1, err
    assert why in err and "compiling without the cache" in err, err


def test_a_cache_folder_others_can_write_is_refused(tmp_path):
    (tmp_path / FOLDER).mkdir()
    (tmp_path / FOLDER).chmod(0o777)
    _refused(tmp_path, "other users can write to it")
    assert os.listdir(tmp_path / FOLDER) == []


def test_a_cache_folder_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / FOLDER).symlink_to(tmp_path / "elsewhere")
    _refused(tmp_path, "not a directory")
    assert os.listdir(tmp_path / "elsewhere") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user owns needs root")
def test_a_cache_folder_another_user_owns_is_refused(tmp_path):
    (tmp_path / FOLDER).mkdir(mode=0o700)
    os.chown(tmp_path / FOLDER, 65534, 65534)
    _refused(tmp_path, "another user owns it")


def test_a_fifo_named_like_an_entry_does_not_hang(tmp_path):
    run(tmp_path)
    (name,) = entries(tmp_path)
    (tmp_path / FOLDER / name).unlink()
    os.mkfifo(tmp_path / FOLDER / name)
    out, err = run(tmp_path)  # (run's timeout fails the test if it hangs)
    assert "compiled now" in out and "not a regular file" in err, err


def _entry(secret, key, ext, payload):
    header = b"EMBRCODE" + struct.pack("<II", 2, 0) + key + ext.ljust(8, b"\0") + struct.pack("<Q", len(payload))
    return header + hmac.new(secret, header + bytes(32) + payload, hashlib.sha256).digest() + payload


def _payload(path):
    return path.read_bytes()[96:]


def test_a_relabelled_entry_is_refused(tmp_path):
    """Another graph's entry copied under this graph's name once made the
    compiled function return the other graph's values."""
    run(tmp_path, "more")
    a, b, _ = entries(tmp_path)
    folder = tmp_path / FOLDER
    (folder / b).write_bytes((folder / a).read_bytes())
    out, err = run(tmp_path, "more")  # (the script checks every result against eager)
    assert out.count("compiled now") == 1 and "ignoring the damaged or foreign entry" in err, err


def test_an_entry_made_with_another_secret_is_refused(tmp_path):
    run(tmp_path)
    (name,) = entries(tmp_path)
    path = tmp_path / FOLDER / name
    path.write_bytes(_entry(bytes(32), name[:32].encode(), b"o", _payload(path)))
    out, err = run(tmp_path)
    assert "compiled now" in out and "ignoring the damaged or foreign entry" in err, err


def test_an_unusable_entry_that_passes_its_checks_is_rebuilt_and_replaced(tmp_path):
    """A valid MAC over an object without this graph's symbols ("Symbols
    not found") once sent the function, in every later process, to the
    interpreter."""
    run(tmp_path, "more")
    a, b, _ = entries(tmp_path)
    folder = tmp_path / FOLDER
    secret = (folder / "secret").read_bytes()
    (folder / b).write_bytes(_entry(secret, b[:32].encode(), b"o", _payload(folder / a)))
    out, err = run(tmp_path, "more")
    assert out.count("compiled now") == 1 and out.count("loaded from the compile cache") == 2
    assert err.count("passed its checks but could not be loaded") == 1, err
    out, err = run(tmp_path, "more")  # replaced by a good one
    assert out.count("loaded from the compile cache") == 3 and err == "", err


@pytest.mark.disk_size("64k")
def test_a_full_disk_costs_one_warning_and_no_partial_entry(small_disk):
    run(small_disk)  # (the folder and its secret made; then the entry goes and the disk fills)
    for name in entries(small_disk):
        (small_disk / FOLDER / name).unlink()
    fill_disk(small_disk / "filler")
    out, err = run(small_disk)
    assert "compiled now" in out and err.count("ember: compile cache:") == 1, err
    assert "No space left on device" in err and "compiling without storing" in err, err
    assert [p for p in os.listdir(small_disk / FOLDER) if p != "secret"] == []  # (no entry, no temporary)
