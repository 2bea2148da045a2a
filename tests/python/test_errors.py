"""Bad input raises the right exception and never crashes the interpreter."""

import gzip
import json
import pickle
import subprocess

import pytest

import sublet
from conftest import data

PICKLE_GZ = data("cs336_attention_microbench.pickle.gz")
CSV = data("cs336_attention_microbench.events.csv")


def test_random_bytes():
    junk = bytes((i * 131 + 7) % 256 for i in range(4096))
    with pytest.raises(sublet.TraceError) as e:
        sublet.load(junk)
    assert e.value.file == "<bytes>" and e.value.line == 1
    assert "not a recognised trace format" in str(e.value)
    assert isinstance(e.value, sublet.Error) and isinstance(e.value, ValueError)


def test_truncated_gzip():
    with open(PICKLE_GZ, "rb") as f:
        blob = f.read()
    with pytest.raises(sublet.TraceError) as e:
        sublet.load(blob[: len(blob) // 2])
    assert e.value.byte is not None and "gzip" in e.value.message
    assert e.value.status == "SUBLET_ERR_PARSE"


def test_truncated_pickle(tmp_path):
    with gzip.open(PICKLE_GZ) as f:
        raw = f.read()
    for cut in (2, 100, len(raw) // 2, len(raw) - 1):
        with pytest.raises(sublet.TraceError) as e:
            sublet.replay(raw[:cut])
        assert e.value.byte is not None, e.value.message
    bad = tmp_path / "cut.pickle"
    bad.write_bytes(raw[: len(raw) // 3])
    with pytest.raises(sublet.TraceError) as e:
        sublet.frag(str(bad))
    assert e.value.file == str(bad)


def test_bad_csv_line(tmp_path):
    with open(CSV) as f:
        lines = f.read().splitlines()
    lines[5] = lines[5].split(",")[0] + ",alloc,zz,zz,0,0"
    bad = tmp_path / "bad.events.csv"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(sublet.TraceError) as e:
        sublet.load(bad)  # an os.PathLike
    assert e.value.line == 6 and e.value.file == str(bad)


def test_missing_file():
    with pytest.raises(sublet.TraceError) as e:
        sublet.load("/nonexistent/trace.csv")
    assert e.value.status == "SUBLET_ERR_IO" and "cannot open" in e.value.message


def test_not_a_snapshot_dict():
    with pytest.raises(sublet.TraceError):
        sublet.replay({"segments": 5})
    with pytest.raises(TypeError):
        sublet.load({"f": lambda: 0})  # cannot be pickled


def test_wrong_types():
    for bad in (None, 42, 3.5, ["a"], object()):
        with pytest.raises(TypeError):
            sublet.load(bad)
    with pytest.raises(TypeError):
        sublet.replay(CSV, conf=5)
    with pytest.raises(TypeError):
        sublet.replay(CSV, device_memory=[1])
    with pytest.raises(TypeError):
        sublet.replay(CSV, at="10")
    with pytest.raises(TypeError):
        sublet.tune()
    with pytest.raises(TypeError):
        sublet.report(CSV, tune="yes")
    with pytest.raises(ValueError):
        sublet.replay(CSV, device_memory="lots")
    with pytest.raises(ValueError):
        sublet.replay(CSV, at=-1)


def test_bad_settings():
    with pytest.raises(sublet.ConfigError) as e:
        sublet.replay(CSV, conf="max_split_size_mb:foo")
    assert "Invalid value 'foo' for max_split_size_mb" in str(e.value)
    assert isinstance(e.value, ValueError)
    for call in (lambda: sublet.frag(CSV, conf="nonsense_option:1"),
                 lambda: sublet.diagnose(CSV, conf="expandable_segments:maybe"),
                 lambda: sublet.min_capacity(CSV, conf="roundup_power2_divisions:3"),
                 lambda: sublet.tune(CSV, current="garbage_collection_threshold:7"),
                 lambda: sublet.report(CSV, conf="max_split_size_mb:-1")):
        with pytest.raises(sublet.ConfigError):
            call()


def test_event_past_the_end():
    with pytest.raises(sublet.ArgumentError) as e:
        sublet.frag(CSV, at=10 ** 9)
    assert "the trace has" in str(e.value)


def test_closed_trace():
    t = sublet.load(CSV)
    t.close()
    with pytest.raises(sublet.Error):
        len(t)
    t.close()  # twice is fine


def test_replay_error_keeps_the_document(cli, tmp_path):
    """A mid-run trace under expandable segments is refused (its prelude
    cannot be adopted): ReplayError, with the document the CLI prints."""
    mid = tmp_path / "midrun.events.csv"
    mid.write_text("seq,action,addr,size,stream,time_us\n"
                   "0,pre_segment,140000000000000,20971520,0,\n"
                   "1,pre_alloc,140000000000000,4194304,0,\n"
                   "2,segment_map,140000020971520,20971520,0,\n"
                   "3,alloc,140000020971520,20971520,0,\n")
    with pytest.raises(sublet.ReplayError) as e:
        sublet.replay(str(mid), conf="expandable_segments:True")
    assert "recorded mid-run under expandable segments" in e.value.message
    out = subprocess.run([cli, "replay", str(mid), "--conf", "expandable_segments:True",
                          "--json"], capture_output=True, text=True)
    assert out.returncode == 1
    assert e.value.result.to_dict() == json.loads(out.stdout)
    assert e.value.result.error == e.value.message


def test_mutated_inputs_never_crash():
    """Bytes flipped, cut and repeated in a snapshot pickle and a CSV: each
    either reads or raises TraceError (the parsers are fuzzed in C; this is
    the path through ctypes)."""
    import random

    rnd = random.Random(1234)
    with gzip.open(PICKLE_GZ) as f:
        raw = f.read()
    with open(CSV, "rb") as f:
        csv = f.read()
    read = refused = 0
    for base in (raw, csv):
        for _ in range(150):
            b = bytearray(base)
            for _ in range(rnd.randint(1, 8)):
                i = rnd.randrange(len(b))
                op = rnd.randrange(3)
                if op == 0:
                    b[i] = rnd.randrange(256)
                elif op == 1:
                    del b[i:i + rnd.randint(1, 64)]
                else:
                    b[i:i] = b[i:i + rnd.randint(1, 64)]
            try:
                t = sublet.load(bytes(b))
            except sublet.TraceError:
                refused += 1
                continue
            read += 1
            try:
                sublet.replay(t, device_memory="1GiB")
            except sublet.Error:
                pass
            t.close()
    assert read + refused == 300 and refused > 0
