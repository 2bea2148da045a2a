"""Every result equals the CLI's JSON, field for field."""

import gzip
import pickle

import pytest

import sublet
from conftest import TRACES, data, run_json


@pytest.mark.parametrize("name", TRACES)
def test_replay_equals_cli(cli, name):
    r = sublet.replay(data(name))
    assert r.to_dict() == run_json(cli, "replay", data(name))
    assert r.events == r.to_dict()["events"] and isinstance(r.peak_reserved_bytes, int)
    assert "PyTorch CUDA memory summary" in r.memory_summary_at_peak
    assert "PyTorch CUDA memory summary" in r.memory_summary_at_end
    assert "allocated_bytes.all.current" in r.memory_stats_at_end


@pytest.mark.parametrize("name", TRACES)
def test_replay_small_device_equals_cli(cli, name):
    """On 70 MiB most traces OOM: the OOM list and the diagnosis too."""
    r = sublet.replay(data(name), device_memory="70MiB")
    assert r.to_dict() == run_json(cli, "replay", data(name), "--device-memory", "70MiB")
    assert r.device_memory_bytes == 70 << 20


def test_replay_options_equal_cli(cli):
    name = data("cs336_attention_microbench.events.csv")
    r = sublet.replay(name, conf="expandable_segments:True", device_memory=1 << 32, at=40)
    assert r.to_dict() == run_json(cli, "replay", name, "--conf", "expandable_segments:True",
                                   "--device-memory", str(1 << 32), "--at", "40")
    assert r.conf == "expandable_segments:True" and r.events == 41


@pytest.mark.parametrize("name", [n for n in TRACES if n.endswith(".pickle.gz")])
def test_snapshot_dict_equals_path(name):
    with gzip.open(data(name)) as f:
        snapshot = pickle.load(f)
    assert isinstance(snapshot, dict)
    from_dict = sublet.replay(snapshot).to_dict()
    from_path = sublet.replay(data(name)).to_dict()
    assert from_dict.pop("trace") == "<snapshot dict>"
    from_path.pop("trace")
    assert from_dict == from_path
    t = sublet.load(snapshot)
    assert t.format == "snapshot-pickle" and len(t) == from_path["trace_events"]


def test_bytes_equal_path():
    name = data("cs336_attention_microbench.events.csv")
    with open(name, "rb") as f:
        r = sublet.replay(f.read()).to_dict()
    p = sublet.replay(name).to_dict()
    assert r.pop("trace") == "<bytes>"
    p.pop("trace")
    assert r == p


@pytest.mark.parametrize("name", TRACES)
def test_min_capacity_equals_cli(cli, name):
    m = sublet.min_capacity(data(name))
    assert m.to_dict() == run_json(cli, "mincap", data(name))
    assert m.min_capacity_bytes >= m.peak_requested_bytes > 0


@pytest.mark.parametrize("name", TRACES)
def test_frag_equals_cli(cli, name):
    assert sublet.frag(data(name)).to_dict() == run_json(cli, "frag", data(name))
    assert sublet.frag(data(name), at=3).to_dict() == run_json(cli, "frag", data(name), "--at", "3")


@pytest.mark.parametrize("name", TRACES)
def test_diagnose_equals_cli(cli, name):
    d = sublet.diagnose(data(name), device_memory="70MiB")
    assert d.to_dict() == run_json(cli, "diagnose", data(name), "--device-memory", "70MiB")


def test_trace_object_reused(cli):
    name = data("decomfl_opt_zo_fl.pickle.gz")
    with sublet.load(name) as t:
        assert t.events == len(t) > 1000 and t.format == "snapshot-pickle"
        assert sublet.replay(t).to_dict() == run_json(cli, "replay", name)
        assert sublet.frag(t).to_dict() == run_json(cli, "frag", name)
    with pytest.raises(sublet.Error):
        sublet.replay(t)


def _tune_doc(d):
    d["search"].pop("seconds")  # wall time
    return d


@pytest.mark.parametrize("names", [["cs336_attention_microbench.pickle.gz"],
                                   ["cs336_attention_microbench.events.csv",
                                    "nonmonotone.events.csv"]])
def test_tune_equals_cli(cli, names):
    paths = [data(n) for n in names]
    seen = []
    r = sublet.tune(*paths, threads=2, progress=lambda done, total: seen.append((done, total)))
    want = _tune_doc(run_json(cli, "tune", *paths, "--threads", "2"))
    assert _tune_doc(r.to_dict()) == want
    assert r.pytorch_conf == want["pytorch"]["evaluation"]["conf"]
    assert r.sublet_conf == want["sublet"]["evaluation"]["conf"]
    assert r.pytorch_env == "PYTORCH_CUDA_ALLOC_CONF=" + r.pytorch_conf
    assert r.warmup_plan == want["warmup"]
    assert r.pareto == want["pareto"]
    assert r.evidence["current"] == want["current"]["evaluation"]
    assert r.evidence["pytorch"]["fixes"] == want["pytorch"]["fixes"]
    assert seen and all(d <= t or t == 0 for d, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_tune_paths_stream_as_loaded():
    # paths are read as `sublet tune` reads them (a CSV streamed through its
    # binary copy, a snapshot loaded whole): the document of the traces loaded
    names = ["cs336_attention_microbench.events.csv", "nonmonotone.events.csv"]
    paths = [data(n) for n in names]
    streamed = sublet.tune(*paths, threads=2).to_dict()
    with sublet.load(paths[0]) as a, sublet.load(paths[1]) as b:
        loaded = sublet.tune(a, b, threads=2).to_dict()
    assert _tune_doc(streamed) == _tune_doc(loaded)
    with pytest.raises(sublet.TraceError, match="cannot open"):
        sublet.tune(data("no_such.events.csv"))


def test_tune_release_equals_cli(cli):
    # the collector wins on this trace (tests/data/README.md): for 2.6 the
    # fraction is a call beside a string 2.6 takes, as `--pytorch-version 2.6`
    p = data("offload_gc.events.csv")
    r = sublet.tune(p, threads=1, pytorch_version="2.6")
    want = run_json(cli, "tune", p, "--threads", "1", "--pytorch-version", "2.6")
    assert _tune_doc(r.to_dict()) == _tune_doc(want)
    assert r.pytorch_conf == "garbage_collection_threshold:0.95", r.pytorch_conf
    assert r.pytorch_code == "torch.cuda.set_per_process_memory_fraction(0.999)"
    assert r.release_note.startswith("for PyTorch 2.6 (--pytorch-version)")
    assert "per_process_memory_fraction" not in r.sublet_conf
    newest = sublet.tune(p, threads=1)
    assert newest.pytorch_conf.endswith(",per_process_memory_fraction:0.999")
    assert newest.pytorch_code is None
    assert newest.release_note.startswith("for PyTorch 2.9 and later only")
    with pytest.raises(sublet.ConfigError, match="follows PyTorch 2.6 and later"):
        sublet.tune(p, threads=1, pytorch_version="1.0")


def test_tune_device_memory_equals_cli(cli):
    p = data("cs336_attention_microbench.events.csv")
    r = sublet.tune(p, device_memory="4GiB", current="max_split_size_mb:128", threads=1)
    want = run_json(cli, "tune", p, "--device-memory", "4GiB", "--current",
                    "max_split_size_mb:128", "--threads", "1")
    assert _tune_doc(r.to_dict()) == _tune_doc(want)
    assert r.device_memory == 4 << 30
