"""The pytest plugin: marker parsing and budget failures now; the real profile -> load -> analyse path once the
loader (tracekit.loader.loading) and the analyzer (tracekit.analyze) are in the tree."""

import importlib.metadata
import importlib.util
from types import SimpleNamespace

import pytest

from tests.helpers.summaries import step_row, summary, tp_run
from tracekit.errors import ConfigError
from tracekit.gate.metrics import RunMetrics
from tracekit.pytest_plugin import budgets_from_marker, overlap_failures

# Installed (make test), the pytest11 entry point loads the plugin already; naming it again with -p would
# register it twice. From a bare checkout (PYTHONPATH) it must be named.
_INSTALLED = any(ep.value == "tracekit.pytest_plugin" for ep in importlib.metadata.entry_points(group="pytest11"))
PLUGIN_ARGS = () if _INSTALLED else ("-p", "tracekit.pytest_plugin")

pytest_plugins = ["pytester"]


def _mark(*args, **kwargs):  # what budgets_from_marker reads of a pytest Mark
    return SimpleNamespace(args=args, kwargs=kwargs)


HAVE_ANALYSIS = importlib.util.find_spec("tracekit.loader.loading") is not None and hasattr(__import__("tracekit"), "analyze")


def test_marker_arguments_become_budgets():
    mark = _mark(min_overlap_ratio=0.3, max_exposed_comm_share=0.2, budgets=["tp/all_gather:exposed_comm_us<=800"])
    assert [b.expr for b in budgets_from_marker(mark)] == [
        "overlap_ratio>=0.3",
        "exposed_comm_share<=0.2",
        "tp/all_gather:exposed_comm_us<=800",
    ]
    with pytest.raises(ConfigError, match="unknown argument.*min_overlap"):
        budgets_from_marker(_mark(min_overlap=0.3))


def test_overlap_failures_explain_in_one_line():
    s = RunMetrics(tp_run([300.0] * 3))  # comm 800, exposed 300: overlap 0.625, share 0.3
    mark = _mark(min_overlap_ratio=0.5, max_exposed_comm_share=0.2)
    [msg] = overlap_failures(s, budgets_from_marker(mark))
    assert msg.startswith("budget exposed_comm_share<=0.2 failed: exposed_comm_share now 0.300")
    quiet = RunMetrics(summary({0: [step_row(1, comm_us=0.0)]}))
    assert overlap_failures(quiet, budgets_from_marker(mark))[0].startswith("no communication recorded")


def test_plugin_registers_the_marker_and_reports_a_bad_budget(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.tracekit_overlap(budgets=["exposed_comm_share<=lots"])
        def test_bad():
            pass

        def test_plain():
            pass
    """)
    result = pytester.runpytest(*PLUGIN_ARGS, "--strict-markers")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*tracekit: budget 'exposed_comm_share<=lots': value 'lots' is not a number*"])


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_ANALYSIS, reason="needs tracekit.loader.loading.load and tracekit.analyze (not yet in tree)")
def test_profiles_a_real_gloo_body_in_both_directions(pytester):
    """Rank 0 is the test process, rank 1 a subprocess; the body runs blocking all_reduces then a matmul, so
    the communication is exposed: a 0 share budget must fail, a loose one must pass."""
    pytester.makepyfile(r'''
        import socket, subprocess, sys, textwrap
        import pytest, torch, torch.distributed as dist

        PEER = textwrap.dedent("""
            import sys, torch, torch.distributed as dist
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=1, world_size=2)
            x = torch.ones(1 << 18)
            for _ in range(2 * 3 * 4):  # the collectives of both tests' bodies
                dist.all_reduce(x)
            dist.barrier(); dist.destroy_process_group()
        """)

        @pytest.fixture(scope="module")
        def world():
            s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
            peer = subprocess.Popen([sys.executable, "-c", PEER, str(port)])
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2)
            yield
            peer.wait(timeout=60)

        def body(tk):
            x = torch.ones(1 << 18)
            for _ in range(3):
                with tk.step():
                    for _ in range(4): dist.all_reduce(x)
                    torch.mm(torch.ones(64, 64), torch.ones(64, 64))

        @pytest.mark.tracekit_overlap(max_exposed_comm_share=0.0)
        def test_a_tight(world, tracekit_profile):
            body(tracekit_profile)

        @pytest.mark.tracekit_overlap(max_exposed_comm_share=1.0, min_overlap_ratio=0.0)
        def test_b_loose(world, tracekit_profile):
            body(tracekit_profile)
            dist.barrier(); dist.destroy_process_group()
    ''')
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, timeout=300)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*tracekit overlap budget: budget exposed_comm_share<=0.0 failed*"])
