"""The API from several threads: the same answers as one by one, and the C
calls release the GIL."""

import threading
import time

import sublet
from conftest import TRACES, data


def test_threads_same_results():
    want = {n: sublet.replay(data(n), device_memory="70MiB").to_dict() for n in TRACES}
    shared = sublet.load(data("decomfl_opt_zo_fl.pickle.gz"))
    frag_want = sublet.frag(shared).to_dict()
    got, errors = {}, []

    def work(i):
        try:
            for n in TRACES[i % len(TRACES):] + TRACES[: i % len(TRACES)]:
                r = sublet.replay(data(n), device_memory="70MiB").to_dict()
                got.setdefault(n, []).append(r)
            assert sublet.frag(shared).to_dict() == frag_want  # one trace, read at once
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for n in TRACES:
        assert len(got[n]) == 6 and all(r == want[n] for r in got[n])
    shared.close()


def test_long_call_releases_the_gil():
    ticks = []
    done = threading.Event()

    def tune():
        sublet.tune(data("decomfl_opt_zo_fl.pickle.gz"), threads=1)
        done.set()

    t = threading.Thread(target=tune)
    start = time.monotonic()
    t.start()
    while not done.is_set() and time.monotonic() - start < 60:
        ticks.append(time.monotonic())
        time.sleep(0.005)
    t.join()
    # Python ran all along the C call: ticks every few milliseconds
    assert len(ticks) > 20
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) < 0.5, max(gaps)
