"""The sparse scaling benchmark runs on virtual CPU devices: its strong-scaling table at 4³."""

import importlib.util
import pathlib
import sys

# The script asks for 8 virtual CPU devices before JAX starts: import it first.
SCRIPT = pathlib.Path(__file__).absolute().parent / "sparse_scaling.py"
_spec = importlib.util.spec_from_file_location("sparse_scaling", SCRIPT)
bench = sys.modules["sparse_scaling"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_device_counts_are_powers_of_two_and_all():
    assert bench.device_counts(1) == [1]
    assert bench.device_counts(8) == [1, 2, 4, 8]
    assert bench.device_counts(6) == [1, 2, 4, 6]


def test_weak_efficiency_is_t1_over_tp_and_strong_divides_by_p():
    rows = [bench.Row(1, 64, 4, "SUCCESS", 1.0, 0.1, 1.0, 2.0, 0, 0),
            bench.Row(4, 256, 6, "NOT_CONVERGED", 1.0, 0.1, 0.5, 1.0, 4096, 1024)]
    weak, strong = bench.table("weak", rows), bench.table("strong", rows)
    assert weak[2].split()[2:4] == ["6", "1.50"]  # its, its/1
    assert weak[2].split()[7] == "2.00" and weak[2].split()[9] == "2.00"  # eff, grad eff
    assert strong[2].split()[7] == "0.50" and strong[2].split()[9] == "0.50"
    assert weak[2].split()[-3:] == ["4.0", "1.0", "NOT_CONVERGED!"]


def test_strong_scaling_on_one_and_two_devices(capsys):
    bench.main(["--mode", "strong", "--m", "4", "--devices", "1", "2", "--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "strong scaling: grid 4³ (64 rows)"
    assert lines[3].split() == ["devices", "rows", "its", "its/1", "first", "s", "setup", "s",
                                "solve", "s", "eff", "grad", "s", "grad", "eff", "KiB/it",
                                "halo/mv"]
    one, two = (line.split() for line in lines[4:6])
    assert one[:2] == ["1", "64"] and two[:2] == ["2", "64"] and len(lines) == 6
    assert len(one) == len(two) == 12  # every column, no failed status
    assert one[7] == one[9] == "1.00" and one[-2:] == ["0.0", "0.0"]  # nothing exchanged
    # Efficiencies are timing ratios printed to two decimals: on a loaded machine a 4³ solve's
    # can read 0.00, so only their form is asserted, never their size.
    assert all(0 <= float(two[i]) < float("inf") for i in (7, 9))
    assert float(two[-2]) > float(two[-1]) > 0  # halo of 2 blocks
